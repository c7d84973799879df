// The cost model, the one prediction model of the project: what a DFlash cycle costs and
// commits, from three measured or estimated costs and the draft's acceptance at each depth.
// The adaptive policy (spec/policy.h) runs it on costs it measures as a sequence decodes; the
// planner (plan/plan.h) on costs it derives (plan/analytic_costs.h) or calibrates
// (plan/calibrate.h); `bench --report` puts its prediction beside the measurement.
//
//   t_verify(k) = t_step * ((1 - s) (1 + slope * (k - 1)) + s * D(k) / top_k)
//                 s: a MoE target's share of a step spent reading its top_k routed experts (0
//                 for a dense target), D(k): distinct experts k rows read per sparse layer
//   E[k]        = 1 + a1 + a1 a2 + ... + a1 ... a(k-1)     tokens a k-row verify commits, for
//                                                          per-depth acceptances a_d
//   plain step  = t_step + t_pick + t_append
//   cycle(k)    = t_draft + t_verify(k) + t_append + t_pick * (k - 1 + E[k])
//   DFlash rate = max over k of E[k] / cycle(k); the adaptive policy decodes plainly
//                 (rate 1 / plain step) when no k beats it.
// t_pick and t_append are the loop's own work outside the passes: a cycle picks its k - 1
// drafts from the draft's logits and the target's tokens up to the first mismatch (E[k] rows),
// and appends the committed rows to the draft's context once, as a plain step does its one
// row (the engine keeps the draft's context current in plain steps too, so that speculation
// can resume; `bench` times its plain baseline that way).
//
// It depends on nothing but core/, so the decoding loop's policy can use it.
#pragma once

#include <span>
#include <vector>

namespace dflash::plan {

// A MoE target's routed experts. A verify's rows choose their experts independently, so it
// reads more experts than a decode step's top_k, and a memory-bound step's expert time grows
// with them: D(rows) = E (1 - (1 - k/E)^rows) per sparse layer under uniform routing over E
// experts. Trained routers concentrate: `effective` is the expert count E_eff <= E whose uniform
// routing gives the distinct counts measured (random weights route near-uniformly, the worst case).
struct ExpertCosts {
  int experts = 0;         // E per sparse layer; 0: a dense target, no expert term
  int top_k = 0;
  double share = 0;        // s: fraction of a decode step spent reading its top_k experts, [0, 1)
  double effective = 0;    // E_eff in [top_k, experts]; 0: experts (uniform routing)
};

// E (1 - (1 - k/E)^rows): the expected distinct experts `rows` rows choose among `experts`.
double DistinctExperts(double experts, int top_k, int rows);
// The E_eff in [top_k, experts] whose DistinctExperts(E_eff, top_k, rows) is `distinct`.
double EffectiveExperts(int experts, int top_k, int rows, double distinct);
// D(rows) for c: with E_eff when set, else E.
double ExpectedDistinctExperts(const ExpertCosts& c, int rows);

// The numbers the model needs.
struct StepCosts {
  double step_ms = 0;   // one plain decode step at the context
  double draft_ms = 0;  // one draft pass over a whole block
  double slope = 0;     // the per-row growth of t_verify's non-expert part, relative to a step
  // The loop's own work (0 where the times above were taken around it, as the adaptive
  // policy's are): one token picked from a logits row (greedy: an argmax over the
  // vocabulary), and one append of committed rows' target features to the draft's context
  // (its fc projection and each draft layer's K/V; 1 to 16 rows cost about alike).
  double pick_ms = 0;
  double append_ms = 0;
  ExpertCosts moe;      // a MoE target's expert term (zero: dense)
};

double VerifyMs(const StepCosts& c, int rows);
double PlainStepMs(const StepCosts& c);  // a plain decode step with the loop's work
// One cycle verifying `rows` rows that commits `expected_tokens` on average, loop included.
double CycleMs(const StepCosts& c, double expected_tokens, int rows);
// The non-expert part of a verify's cost ratio t(rows) / t(1) whose `distinct` experts per
// sparse layer make the rest (the ratio itself for a dense target): the sample the slope fits.
double DenseRatio(const ExpertCosts& moe, double ratio, double distinct);
// The slope of measured verify costs, ratios[i] = t(rows[i]) / t(1): the least-squares fit of
// DenseRatio - 1 = slope x (rows - 1) with the expected distinct experts (0 when no point has
// more than one row).
double FitVerifySlope(std::span<const int> rows, std::span<const double> ratios, const ExpertCosts& moe = {});
// Tokens per ms of cycles that verify `rows` rows and commit `expected_tokens` on average.
double CycleTokensPerMs(const StepCosts& c, double expected_tokens, int rows);

// The verify length in [2, block] with the best CycleTokensPerMs; expected(rows) gives E[rows].
// A template so that the policy's per-step call allocates nothing.
template <typename ExpectedFn>
int BestVerifyRows(const StepCosts& c, int block, ExpectedFn expected) {
  int best = 2;
  double best_rate = CycleTokensPerMs(c, expected(2), 2);
  for (int rows = 3; rows <= block; ++rows) {
    const double rate = CycleTokensPerMs(c, expected(rows), rows);
    if (rate > best_rate) {
      best = rows;
      best_rate = rate;
    }
  }
  return best;
}

// E[rows] for per-depth acceptances accept_at_depth[d - 1] = P(draft d accepted | drafts
// 1..d-1 were); depths past the list repeat its last value.
double ExpectedTokens(std::span<const double> accept_at_depth, int rows);
double ExpectedTokens(double a, int rows);  // the same acceptance a at every depth

// The per-depth acceptance a whose block of `block` rows commits `tau` tokens per cycle
// (1 + a + ... + a^(block-1) = tau), by bisection; 1 when tau >= block. Acceptance falling
// geometrically with depth is the modelling assumption where only tau is reported (z-lab's
// histograms fall about so).
double PerDepthAcceptance(double tau, int block);
// That a at each of the block's block - 1 draft depths.
std::vector<double> GeometricCurve(double tau, int block);

struct Prediction {
  double plain_tok_s = 0;
  double full_block_tok_s = 0;  // --spec-policy always: every cycle verifies the whole block
  double adaptive_tok_s = 0;    // the adaptive policy: best k, or plain decoding when none pays
  int best_rows = 1;            // the adaptive policy's verify length (1: decodes plainly)
  double tau = 0;               // E[block]: tokens per full-block cycle
};
Prediction Predict(const StepCosts& costs, std::span<const double> accept_at_depth, int block);

}  // namespace dflash::plan
