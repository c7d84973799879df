// The number that decides whether DFlash can win on a machine: how much a B-row target pass
// (a verify) costs relative to a 1-row pass (a decode step), at a given context length.
// A DFlash cycle commits tau tokens for one verify plus one draft pass, so it pays only if
// t(B) + t(draft) < tau * t(1).
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "model/target.h"

namespace dflash {

struct VerifyCostPoint {
  int context = 0;   // positions already in the KV cache
  int rows = 0;      // rows in the timed forward pass
  double ms = 0;     // median time of the pass
  double ms_min = 0, ms_max = 0;
  double ratio = 0;  // ms / ms of the 1-row pass at the same context
  PassProfile stages;  // with profiling: mean ms per stage of the timed passes
};

// The multiply-adds of one target pass of `rows` rows on top of `context` cached positions,
// every row's logits computed (as MeasureVerifyCost's passes do): the matrices (layers and LM
// head), attention (scores and value sums over each row's keys, sliding windows included) and,
// in a MoE target's sparse layers, the experts stage in place of a dense MLP (each row's router,
// top_k experts and shared expert: a row's work does not depend on which experts others chose;
// the bytes read do, PassProfile::experts_read counts them).
struct PassMacs {
  double matmul = 0, attention = 0, experts = 0;
};
PassMacs CountPassMacs(const DecoderConfig& c, int context, int rows, const MoeConfig& moe = {});

using Progress = std::function<void(const char* what, int done, int total)>;

// Fills the target's KV cache to each context (ascending) with synthetic keys and values
// (TargetModel::FillSyntheticKv: no prefill, so 16k contexts take seconds), then times Forward
// of each row count `repeats` times (after one warm-up), cropping back after every pass.
// `profile` also splits the timed passes by stage (its clock reads are in the times).
std::vector<VerifyCostPoint> MeasureVerifyCost(TargetModel& target, std::vector<int> contexts,
                                               std::vector<int> rows, int repeats,
                                               const Progress& progress = {}, bool profile = false);

}  // namespace dflash
