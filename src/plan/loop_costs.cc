#include "plan/loop_costs.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "core/error.h"
#include "spec/sampler.h"

namespace dflash::plan {

namespace {

double NowMs() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

LoopCosts MeasureLoopCosts(Drafter& draft, int64_t feature_width, int vocab, int pos, int repeats) {
  if (repeats < 1 || feature_width < 1 || vocab < 1) {
    Fail("loop costs: needs repeats, a feature width and a vocabulary, got ", repeats, ", ", feature_width, ", ", vocab);
  }
  std::vector<float> features(feature_width), logits(vocab);
  for (int64_t i = 0; i < feature_width; ++i) features[i] = float(int(i % 7) - 3) * 0.25f;
  for (int i = 0; i < vocab; ++i) logits[i] = float((i * 7919) % 1009) * 1e-3f;
  std::vector<double> append_ms, pick_ms;
  int32_t sink = 0;  // keeps the argmaxes from being optimised away
  for (int r = 0; r <= repeats; ++r) {  // the first of each warms up
    const double t0 = NowMs();
    draft.AppendContext(features.data(), 1, pos + r);
    const double t1 = NowMs();
    logits[r % vocab] += 1.0f;
    sink ^= Sampler::Argmax(logits.data(), vocab);
    const double t2 = NowMs();
    if (r == 0) continue;
    append_ms.push_back(t1 - t0);
    pick_ms.push_back(t2 - t1);
  }
  if (sink < 0) Fail("internal: argmax returned ", sink);
  return {Median(pick_ms), Median(append_ms)};
}

double MeasureSustainedStepMs(TargetModel& target, int context, int min_steps, double min_ms) {
  const int max_steps = target.kv_capacity() - context;
  if (max_steps < 1 || min_steps < 1) Fail("sustained step: no room for steps after context ", context);
  target.FillSyntheticKv(context);
  const int32_t token = 1;
  target.Forward({&token, 1}, /*all_logits=*/false);  // warm-up
  target.Truncate(context);
  const double start = NowMs();
  int steps = 0;
  while (steps < max_steps && (steps < min_steps || NowMs() - start < min_ms)) {
    target.Forward({&token, 1}, /*all_logits=*/false);
    ++steps;
  }
  const double ms = (NowMs() - start) / steps;
  target.Truncate(context);
  return ms;
}

}  // namespace dflash::plan
