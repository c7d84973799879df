// The cost model, the one prediction model of the project: what a DFlash cycle costs and
// commits, from three measured or estimated costs and the draft's acceptance at each depth.
// The adaptive policy (spec/policy.h) runs it on costs it measures as a sequence decodes; the
// planner (plan/plan.h) on costs it derives (plan/analytic_costs.h) or calibrates
// (plan/calibrate.h); `bench --report` puts its prediction beside the measurement.
//
//   t_verify(k) = t_step * (1 + slope * (k - 1))
//   E[k]        = 1 + a1 + a1 a2 + ... + a1 ... a(k-1)     tokens a k-row verify commits, for
//                                                          per-depth acceptances a_d
//   DFlash rate = max over k of E[k] / (t_draft + t_verify(k)); the adaptive policy decodes
//                 plainly (rate 1 / t_step) when no k beats it.
//
// It depends on nothing but core/, so the decoding loop's policy can use it.
#pragma once

#include <span>
#include <vector>

namespace dflash::plan {

// The three numbers the model needs.
struct StepCosts {
  double step_ms = 0;   // one plain decode step at the context
  double draft_ms = 0;  // one draft pass over a whole block
  double slope = 0;     // (t_verify(k) / t_step - 1) / (k - 1)
};

double VerifyMs(const StepCosts& c, int rows);
// The slope of measured verify costs, ratios[i] = t(rows[i]) / t(1): the least-squares fit of
// ratio - 1 = slope x (rows - 1) (0 when no point has more than one row).
double FitVerifySlope(std::span<const int> rows, std::span<const double> ratios);
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
