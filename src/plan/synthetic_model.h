// Qwen3 targets and DFlash drafts of a registry pair's real shapes with synthetic weights, made
// in memory (nothing is read or downloaded), for `dflash plan --calibrate`: a pass costs the
// same whatever the weights are, so timing these tells what the real pair costs here. Weights
// are bf16 (as the pairs are published), pseudo-random and small enough that activations stay
// finite; the caller quantises them to the planned format. Only `layers` of the decoder's
// layers are built (the calibration extrapolates per layer).
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "io/tensor_store.h"
#include "model/config.h"
#include "plan/registry.h"

namespace dflash::plan {

struct SyntheticWeights {
  TensorStore store{"<synthetic>"};
  std::deque<std::vector<uint16_t>> buffers;  // bf16 elements, at stable addresses
};

struct SyntheticTarget {
  TargetConfig config;
  SyntheticWeights weights;
};

struct SyntheticDraft {
  DraftConfig config;
  SyntheticWeights weights;
};

// Throws Error for shapes this engine does not run (anything but a dense Qwen3 target).
void CheckSyntheticShape(const ModelShape& target);

// `max_positions`: the context the model must hold (max_position_embeddings).
SyntheticTarget MakeSyntheticTarget(const ModelShape& shape, int layers, int max_positions, uint64_t seed);
// A draft of `layers` layers capturing the target's last layer (one capture layer: the draft's
// pass does not depend on how many it fuses, only its context append does).
SyntheticDraft MakeSyntheticDraft(const ModelShape& shape, const TargetConfig& target, int layers, uint64_t seed);

}  // namespace dflash::plan
