// The decoding loop's own costs that timing the passes leaves out (plan/cost_model.h's
// pick_ms and append_ms), timed on the models the loop runs. A plain step on a small model
// costs about twice its target pass on this machine: without these terms the cost model
// predicted plain decoding far too fast.
#pragma once

#include <cstdint>

#include "model/target.h"
#include "spec/drafter.h"

namespace dflash::plan {

struct LoopCosts {
  double pick_ms = 0;    // one greedy pick: an argmax over the vocabulary
  double append_ms = 0;  // one row of target features appended to the draft's context
};

// Medians of `repeats` single-row appends of synthetic features ([feature_width] floats: the
// capture layers times the hidden size) at positions pos, pos + 1, ... (the caller crops the
// draft's context back or starts over), and of `repeats` argmaxes over `vocab` logits.
LoopCosts MeasureLoopCosts(Drafter& draft, int64_t feature_width, int vocab, int pos, int repeats);

// A decode runs its passes back to back for seconds, and on a shared machine gets only a share
// of the cores then, which the median of single timed passes does not see (the median pass ran
// unpreempted: at load 24 on 2 cores a 0.6 ms toy pass decoded at 7.3 ms a token). The mean of
// a stretch of consecutive 1-row passes at `context` (at least `min_steps` and `min_ms`, at most
// what the KV capacity holds) is the step a decode would see now. Leaves the KV at `context`.
double MeasureSustainedStepMs(TargetModel& target, int context, int min_steps, double min_ms);

}  // namespace dflash::plan
