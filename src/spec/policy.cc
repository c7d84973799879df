#include "spec/policy.h"

#include <algorithm>

#include "core/error.h"

namespace dflash {

namespace {
// Moving-average weight of the newest sample: recent enough to follow a growing KV and a
// change of topic, smooth enough that one lucky or unlucky cycle does not flip the decision.
constexpr double kAlpha = 0.3;
// A time sample counts at most this multiple of the current average: a thread descheduled
// for a few ms must not read as a regime change (a real one still shows within a few samples).
constexpr double kMaxJump = 3.0;
double Blend(double avg, double sample) { return avg < 0 ? sample : avg + kAlpha * (sample - avg); }
double BlendTime(double avg, double ms) { return Blend(avg, avg < 0 ? ms : std::min(ms, kMaxJump * avg)); }
}  // namespace

SpecPolicy ParseSpecPolicy(std::string_view name) {
  if (name == "always") return SpecPolicy::kAlways;
  if (name == "adaptive") return SpecPolicy::kAdaptive;
  Fail("speculation policy must be 'always' or 'adaptive', got '", name, "'");
}

std::string_view SpecPolicyName(SpecPolicy p) { return p == SpecPolicy::kAlways ? "always" : "adaptive"; }

bool SpeculationController::Speculate() const {
  if (policy_ == SpecPolicy::kAlways) return true;
  // One plain step first: without its cost there is nothing to compare a cycle with.
  return step_ms_ >= 0 && plain_left_ == 0 && cycles_since_step_ < kRefreshCycles;
}

void SpeculationController::OnPlainStep(double ms) {
  step_ms_ = BlendTime(step_ms_, ms);
  cycles_since_step_ = 0;
  if (plain_left_ > 0) --plain_left_;
}

void SpeculationController::OnCycle(double ms, int tokens_committed) {
  ++cycles_since_step_;
  if (fresh_) {
    cycle_ms_ = ms;
    tau_ = tokens_committed;
    fresh_ = false;
  } else {
    cycle_ms_ = BlendTime(cycle_ms_, ms);
    tau_ = Blend(tau_, tokens_committed);
  }
  if (policy_ == SpecPolicy::kAlways) return;
  // tokens per ms speculating vs plain, i.e. tau / t_cycle vs 1 / t_step.
  if (tau_ * step_ms_ >= cycle_ms_) {
    losses_ = 0;
    backoff_ = kMinBackoff;
    probing_ = false;
    return;
  }
  if (++losses_ < (probing_ ? kProbeCycles : kLossesToFallBack)) return;
  ++fallbacks_;
  probing_ = true;
  losses_ = 0;
  plain_left_ = backoff_;
  backoff_ = std::min(2 * backoff_, kMaxBackoff);
  fresh_ = true;
}

}  // namespace dflash
