// When to speculate, and how far. A DFlash cycle drafts a whole block in one pass, but the
// target need not verify all of it: verifying the pending token and the first rows-1 drafts
// is just as lossless, and on a CPU a verify's cost grows with its rows (a 16-row verify over
// a long KV costs several decode steps). So each cycle picks the verify length that commits the
// most tokens per millisecond,
//   rows* = argmax_k E[tokens | k] / (t_draft + t_verify(k)),
// and decodes plainly instead while even that loses to 1 / t_step. Everything is measured as
// the sequence runs (the cost model of plan/cost_model.h, which the planner predicts with too):
// t_step from plain steps, t_draft and the per-row slope of t_verify from
// cycles, and the draft's acceptance rate at each depth from what the target accepted. On a MoE
// target a verify's cost also grows with the distinct experts its rows read: the slope is fitted
// to the rest of its cost, and the expert count routing concentrates on is fitted to the
// distinct experts each verify measured, so a longer verify is charged the experts it would add. While
// DFlash loses the controller backs off (doubling) and probes again with a short, cheap verify;
// a verify whose every draft was accepted lengthens the next one. Output never depends on these
// choices: every path is lossless, so only speed does.
#pragma once

#include <string_view>
#include <vector>

#include "plan/cost_model.h"

namespace dflash {

enum class SpecPolicy {
  kAlways,    // every step verifies the whole block (benchmarks of raw DFlash, tests)
  kAdaptive,  // verify the length measured to pay best; decode plainly while none pays
};

SpecPolicy ParseSpecPolicy(std::string_view name);  // "always" | "adaptive"
std::string_view SpecPolicyName(SpecPolicy p);

class SpeculationController {
 public:
  // block: the draft's block size B (a cycle verifies 2..B rows); moe: a MoE target's experts
  // and their share of a step (effective unset: learnt from OnCycle's measured counts).
  SpeculationController(SpecPolicy policy, int block, const plan::ExpertCosts& moe = {});

  // Rows the next step should verify: 1 for a plain step, else 2..block (the pending token and
  // rows - 1 drafts). Callers clamp it to what is left to generate.
  int NextRows() const;
  void OnPlainStep(double ms);
  // A cycle that verified `rows` rows of which the first `accepted` drafts were accepted, its
  // verify reading `distinct_experts` routed experts per sparse layer (< 0: not measured).
  void OnCycle(double draft_ms, double verify_ms, int rows, int accepted, double distinct_experts = -1);

  int fallbacks() const { return fallbacks_; }
  // The costs measured so far, as the cost model takes them (step_ms < 0: no plain step yet).
  plan::StepCosts costs() const { return Costs(); }
  int probes() const { return probes_; }
  // The expected tokens a cycle verifying `rows` rows commits, from the acceptance estimates.
  double ExpectedTokens(int rows) const;

  // Back-off bounds in plain steps; consecutive losing cycles before falling back.
  static constexpr int kMinBackoff = 16;
  static constexpr int kMaxBackoff = 1024;
  static constexpr int kLossesToFallBack = 2;
  // Rows of the first cycle and of a probe after a back-off: enough drafts to see whether the
  // draft agrees, at a fraction of a full verify's cost.
  static constexpr int kProbeRows = 4;
  // While DFlash wins, one plain step every this many cycles keeps t_step current (it grows
  // with the KV) and keeps one noisy early sample from deciding the whole sequence.
  static constexpr int kRefreshCycles = 64;

 private:
  plan::StepCosts Costs() const;    // the measured costs, as the cost model takes them
  double Rate(int rows) const;      // estimated tokens per ms verifying `rows` rows
  int BestRows() const;
  void ResetAcceptance();

  SpecPolicy policy_;
  int block_;
  double step_ms_ = -1;   // moving average of a plain step (-1: not measured yet)
  double draft_ms_ = -1;  // moving average of a draft pass
  double slope_ = -1;     // moving average of (DenseRatio(t_verify / t_step) - 1) / (rows - 1)
  plan::ExpertCosts moe_;  // effective: moving average of the measured E_eff (0: none yet)
  // Decayed counts, per draft depth d = 1..block-1, of cycles that verified draft d with drafts
  // 1..d-1 accepted (reached) and of those that accepted it too.
  std::vector<double> reached_, accepted_;
  int next_rows_;          // a verify length forced by a probe or a full acceptance (0: none)
  int plain_left_ = 0;     // plain steps before the next probe
  int losses_ = 0;         // consecutive cycles judged losing
  int backoff_ = kMinBackoff;
  int cycles_since_step_ = 0;
  bool probing_ = false;   // speculating again after a back-off, not yet seen winning
  bool fresh_ = false;     // the next cycle is a probe: a faster time replaces the averages
  int fallbacks_ = 0;
  int probes_ = 0;
};

}  // namespace dflash
