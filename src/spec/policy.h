// When to speculate. A DFlash cycle pays only when the tokens it commits outweigh what it
// costs over a plain step: speculate while tau / t_cycle >= 1 / t_step. On long prompts,
// small machines or text the draft does not know, that fails (the 16-row verify over a long
// KV costs several decode steps and acceptance drops), and a runtime that keeps speculating
// is slower than plain decoding. The controller measures both costs as the sequence runs,
// falls back to plain decoding while DFlash loses, and probes again after a back-off that
// doubles each time a probe loses. Output never depends on these choices: both paths are
// lossless, so only speed does.
#pragma once

#include <string_view>

namespace dflash {

enum class SpecPolicy {
  kAlways,    // every step is a DFlash cycle (benchmarks of raw DFlash, tests)
  kAdaptive,  // speculate only while it is measured to win
};

SpecPolicy ParseSpecPolicy(std::string_view name);  // "always" | "adaptive"
std::string_view SpecPolicyName(SpecPolicy p);

class SpeculationController {
 public:
  explicit SpeculationController(SpecPolicy policy) : policy_(policy) {}

  // Whether the next step should be a DFlash cycle.
  bool Speculate() const;
  void OnPlainStep(double ms);
  void OnCycle(double ms, int tokens_committed);

  int fallbacks() const { return fallbacks_; }
  double tau() const { return tau_; }

  // Back-off bounds in plain steps; consecutive losing cycles before falling back, the first
  // time and after a back-off. A probe after a back-off is a single cycle: on a CPU one cycle
  // can cost several plain steps, and one is enough to see whether the draft agrees again.
  static constexpr int kMinBackoff = 16;
  static constexpr int kMaxBackoff = 1024;
  static constexpr int kLossesToFallBack = 2;
  static constexpr int kProbeCycles = 1;
  // While DFlash wins, one plain step every this many cycles keeps t_step current (it grows
  // with the KV) and keeps one noisy early sample from deciding the whole sequence.
  static constexpr int kRefreshCycles = 64;

 private:
  SpecPolicy policy_;
  double step_ms_ = -1;   // moving average of a plain step (-1: not measured yet)
  double cycle_ms_ = -1;  // moving average of a cycle, draft + verify
  double tau_ = -1;       // moving average of tokens committed per cycle
  int plain_left_ = 0;    // plain steps before the next probe
  int losses_ = 0;        // consecutive cycles judged losing
  int backoff_ = kMinBackoff;
  int cycles_since_step_ = 0;
  bool fresh_ = true;     // next cycle starts a new probe: overwrite, do not blend
  bool probing_ = false;  // speculating again after a back-off, not yet seen winning
  int fallbacks_ = 0;
};

}  // namespace dflash
