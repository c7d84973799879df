// `dflash plan --calibrate`: this machine's costs for a pair's real shapes, measured on
// synthetic weights (plan/synthetic_model.h) in the planned format: a plain decode step and a
// verify of each row count at the context, a draft pass, and prefill speed. Models as large as
// the published ones would take minutes to build and may not fit, so only a few layers are
// built and the times are extrapolated per layer: a pass's LM-head share (measured by stage)
// stays, the rest scales by layers / layers built. The loop's own work (a pick over the
// vocabulary, an append to the draft's context: plan/loop_costs.h) is timed too, and a stretch
// of consecutive steps says what share of the machine a decode gets now. The result feeds the one cost model
// (plan/cost_model.h) in place of the analytic estimate.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "plan/cost_model.h"
#include "plan/memory_model.h"
#include "plan/registry.h"

namespace dflash::plan {

struct CalibrationOptions {
  int target_layers = 2;  // layers built (at most the model's)
  int draft_layers = 2;
  int repeats = 3;        // timed passes per point (median)
  std::vector<int> rows{1, 2, 4, 8, 16};
};

struct Calibration {
  std::string format;       // the format measured
  std::string format_note;  // where it stands in for another ("" when it is the planned one)
  std::string kv_type;
  int64_t context = 0;
  int target_layers_built = 0, target_layers = 0, draft_layers_built = 0, draft_layers = 0;
  std::vector<int> rows;
  std::vector<double> verify_ms;   // extrapolated to the whole target, per row count
  std::vector<double> lm_head_share;  // of each measured pass
  double draft_ms = 0;              // one draft pass over a block, extrapolated
  double pick_ms = 0;               // one greedy pick over the vocabulary
  double append_ms = 0;             // one row appended to the draft's context, scaled to its
                                    // capture layers and layers
  // The mean of consecutive 1-row passes over their median single pass (plan/loop_costs.h):
  // about 1 on a quiet machine, the inverse of this process's share of the cores on a busy
  // one. The 1-row pass, the loop's work and prefill here are scaled by it.
  double sustained_factor = 1;
  // The same for back-to-back cycles (a draft pass and the widest verify) over their median
  // passes; it scales the draft pass and the multi-row verifies.
  double cycle_factor = 1;
  double prefill_tok_s = 0;         // at half the context, extrapolated
  double ttft_ms = 0;               // a prompt of `context` tokens at that speed
  double build_s = 0, measure_s = 0;
  StepCosts costs;
  bool extrapolated() const { return target_layers_built < target_layers || draft_layers_built < draft_layers; }
};

// Throws Error for a pair the engine does not run or a format it cannot calibrate.
Calibration Calibrate(const ModelShape& target, const ModelShape& draft, const std::string& format, int64_t context,
                      ThreadPool& pool, const CalibrationOptions& options = {});

}  // namespace dflash::plan
