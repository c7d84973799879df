#include "spec/policy.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace dflash {

namespace {
// Moving-average weight of the newest sample: recent enough to follow a growing KV and a
// change of topic, smooth enough that one lucky or unlucky cycle does not flip the decision.
constexpr double kAlpha = 0.3;
// A time sample counts at most this multiple of the current average: a thread descheduled
// for a few ms must not read as a regime change (a real one still shows within a few samples).
constexpr double kMaxJump = 3.0;
// Per-depth acceptance counts decay by this factor every cycle (a window of a few cycles: loops
// start and end quickly; a depth no recent verify reached drifts back to the prior), and start
// from a weak prior of one half.
constexpr double kDecay = 0.85;
constexpr double kPriorReached = 0.2, kPriorAccepted = 0.1;
// A verify whose drafts were all accepted lengthens the next one unless the next depth was seen
// within the last few cycles (its count still above this).
constexpr double kSeenRecently = 0.25;
// Probing may cost at most this fraction of the plain steps between probes.
constexpr double kProbeBudget = 0.1;

double Blend(double avg, double sample) { return avg < 0 ? sample : avg + kAlpha * (sample - avg); }
double BlendTime(double avg, double ms) { return Blend(avg, avg < 0 ? ms : std::min(ms, kMaxJump * avg)); }
// A probe measures the present, not the stretch that lost: a sample below the average replaces
// it. One above is only `blended` like any other sample (capped, for times): timing noise is
// one-sided (a descheduled thread reads slow, nothing reads fast), and a single slow probe
// taken at face value would switch speculation off for up to kMaxBackoff steps.
double ProbeUpdate(double avg, double sample, double blended) { return avg >= 0 && sample < avg ? sample : blended; }
}  // namespace

SpecPolicy ParseSpecPolicy(std::string_view name) {
  if (name == "always") return SpecPolicy::kAlways;
  if (name == "adaptive") return SpecPolicy::kAdaptive;
  Fail("speculation policy must be 'always' or 'adaptive', got '", name, "'");
}

std::string_view SpecPolicyName(SpecPolicy p) { return p == SpecPolicy::kAlways ? "always" : "adaptive"; }

SpeculationController::SpeculationController(SpecPolicy policy, int block, const plan::ExpertCosts& moe)
    : policy_(policy), block_(std::max(1, block)), moe_(moe), next_rows_(std::min(kProbeRows, std::max(1, block))) {
  ResetAcceptance();
}

void SpeculationController::ResetAcceptance() {
  reached_.assign(block_, 0.0);
  accepted_.assign(block_, 0.0);
}

double SpeculationController::ExpectedTokens(int rows) const {
  double expected = 1.0, all_accepted = 1.0;  // the target's own token always commits
  for (int d = 1; d < std::min(rows, block_); ++d) {
    all_accepted *= (accepted_[d] + kPriorAccepted) / (reached_[d] + kPriorReached);
    expected += all_accepted;
  }
  return expected;
}

plan::StepCosts SpeculationController::Costs() const {
  // The loop's own work is inside the measured times: no pick or append terms.
  return {step_ms_, std::max(draft_ms_, 0.0), std::max(slope_, 0.0), 0, 0, moe_};
}

double SpeculationController::Rate(int rows) const {
  return plan::CycleTokensPerMs(Costs(), ExpectedTokens(rows), rows);
}

int SpeculationController::BestRows() const {
  return plan::BestVerifyRows(Costs(), block_, [this](int rows) { return ExpectedTokens(rows); });
}

int SpeculationController::NextRows() const {
  if (block_ < 2) return 1;
  if (policy_ == SpecPolicy::kAlways) return block_;
  // One plain step first: without its cost there is nothing to compare a cycle with.
  if (step_ms_ < 0 || plain_left_ > 0 || cycles_since_step_ >= kRefreshCycles) return 1;
  return next_rows_ > 0 ? next_rows_ : BestRows();
}

void SpeculationController::OnPlainStep(double ms) {
  step_ms_ = BlendTime(step_ms_, ms);
  cycles_since_step_ = 0;
  if (plain_left_ > 0) --plain_left_;
}

void SpeculationController::OnCycle(double draft_ms, double verify_ms, int rows, int accepted,
                                    double distinct_experts) {
  if (rows < 2 || rows > block_ || accepted < 0 || accepted > rows - 1) {
    Fail("internal: cycle of ", rows, " rows with ", accepted, " accepted drafts (block ", block_, ")");
  }
  ++cycles_since_step_;
  const bool probe = fresh_;
  fresh_ = false;
  probes_ += probe;
  const double blended_draft = BlendTime(draft_ms_, draft_ms);
  draft_ms_ = probe ? ProbeUpdate(draft_ms_, draft_ms, blended_draft) : blended_draft;
  double distinct = moe_.experts > 0 ? plan::ExpectedDistinctExperts(moe_, rows) : 0;
  if (moe_.experts > 0 && distinct_experts >= 0) {
    distinct = distinct_experts;
    const double effective = plan::EffectiveExperts(moe_.experts, moe_.top_k, rows, distinct);
    moe_.effective = Blend(moe_.effective > 0 ? moe_.effective : -1, effective);
  }
  if (step_ms_ > 0) {
    const double capped_ms = slope_ < 0 ? verify_ms : std::min(verify_ms, kMaxJump * plan::VerifyMs(Costs(), rows));
    const double ratio = plan::DenseRatio(moe_, capped_ms / step_ms_, distinct);
    const double slope = std::clamp((ratio - 1.0) / (rows - 1), 0.0, 4.0);
    slope_ = probe ? ProbeUpdate(slope_, slope, Blend(slope_, slope)) : Blend(slope_, slope);
  }
  for (int d = 1; d < block_; ++d) {
    reached_[d] *= kDecay;
    accepted_[d] *= kDecay;
  }
  for (int d = 1; d <= std::min(accepted + 1, rows - 1); ++d) {
    reached_[d] += 1.0;
    accepted_[d] += d <= accepted ? 1.0 : 0.0;
  }
  // Every verified draft accepted: the draft may agree further than this verify could show.
  const bool unexplored = rows < block_ && reached_[rows] < kSeenRecently;
  next_rows_ = accepted == rows - 1 && unexplored ? std::min(block_, 2 * rows) : 0;
  if (policy_ == SpecPolicy::kAlways || step_ms_ <= 0) return;

  const double vs_plain = Rate(BestRows()) * step_ms_;  // tokens per ms, relative to plain steps
  if (vs_plain >= 1.0) {
    losses_ = 0;
    backoff_ = kMinBackoff;
    probing_ = false;
    return;
  }
  if (++losses_ < (probing_ ? 1 : kLossesToFallBack)) return;
  ++fallbacks_;
  probing_ = true;
  losses_ = 0;
  // Wait long enough that the next probe costs at most kProbeBudget of the time until it.
  const int probe_rows = std::min(kProbeRows, block_);
  const double probe_steps = ExpectedTokens(probe_rows) / (Rate(probe_rows) * step_ms_);
  plain_left_ = std::max(backoff_, static_cast<int>(std::ceil(probe_steps / kProbeBudget)));
  plain_left_ = std::min(plain_left_, kMaxBackoff);
  backoff_ = std::min(2 * backoff_, kMaxBackoff);
  next_rows_ = probe_rows;
  ResetAcceptance();
  fresh_ = true;
}

}  // namespace dflash
