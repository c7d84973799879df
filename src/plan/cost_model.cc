#include "plan/cost_model.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace dflash::plan {

double DistinctExperts(double experts, int top_k, int rows) {
  return experts * (1.0 - std::pow(1.0 - top_k / experts, rows));
}

double EffectiveExperts(int experts, int top_k, int rows, double distinct) {
  // DistinctExperts grows with the expert count (from top_k at E = top_k towards rows * top_k).
  double lo = top_k, hi = experts;
  if (distinct <= DistinctExperts(lo, top_k, rows)) return lo;
  if (distinct >= DistinctExperts(hi, top_k, rows)) return hi;
  for (int i = 0; i < 50; ++i) {
    const double mid = (lo + hi) / 2;
    (DistinctExperts(mid, top_k, rows) < distinct ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

double ExpectedDistinctExperts(const ExpertCosts& c, int rows) {
  return DistinctExperts(c.effective > 0 ? c.effective : c.experts, c.top_k, rows);
}

double VerifyMs(const StepCosts& c, int rows) {
  const double dense = 1.0 + c.slope * (rows - 1);
  if (c.moe.experts == 0) return c.step_ms * dense;
  const double s = c.moe.share;
  return c.step_ms * ((1 - s) * dense + s * ExpectedDistinctExperts(c.moe, rows) / c.moe.top_k);
}

double DenseRatio(const ExpertCosts& moe, double ratio, double distinct) {
  if (moe.experts == 0) return ratio;
  return (ratio - moe.share * distinct / moe.top_k) / (1 - moe.share);
}

double FitVerifySlope(std::span<const int> rows, std::span<const double> ratios, const ExpertCosts& moe) {
  if (rows.size() != ratios.size()) Fail("internal: ", rows.size(), " row counts for ", ratios.size(), " verify costs");
  double num = 0, den = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const double distinct = moe.experts > 0 ? ExpectedDistinctExperts(moe, rows[i]) : 0;
    num += (DenseRatio(moe, ratios[i], distinct) - 1) * (rows[i] - 1);
    den += double(rows[i] - 1) * (rows[i] - 1);
  }
  return den > 0 ? std::max(0.0, num / den) : 0.0;
}

double PlainStepMs(const StepCosts& c) { return c.step_ms + c.pick_ms + c.append_ms; }

double CycleMs(const StepCosts& c, double expected_tokens, int rows) {
  return c.draft_ms + VerifyMs(c, rows) + c.append_ms + c.pick_ms * (rows - 1 + expected_tokens);
}

double CycleTokensPerMs(const StepCosts& c, double expected_tokens, int rows) {
  return expected_tokens / CycleMs(c, expected_tokens, rows);
}

double ExpectedTokens(std::span<const double> accept_at_depth, int rows) {
  double sum = 1, all_accepted = 1;  // the target's own token always commits
  for (int d = 1; d < rows && !accept_at_depth.empty(); ++d) {
    all_accepted *= accept_at_depth[std::min<size_t>(d - 1, accept_at_depth.size() - 1)];
    sum += all_accepted;
  }
  return sum;
}

double ExpectedTokens(double a, int rows) { return ExpectedTokens(std::span<const double>(&a, 1), rows); }

double PerDepthAcceptance(double tau, int block) {
  if (block < 1) Fail("cost model: block must be at least 1, got ", block);
  if (!(tau >= 1)) Fail("cost model: tau (tokens per cycle) must be at least 1, got ", tau);
  if (tau >= block) return 1.0;
  double lo = 0, hi = 1;
  for (int i = 0; i < 60; ++i) {
    const double mid = (lo + hi) / 2;
    (ExpectedTokens(mid, block) < tau ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

std::vector<double> GeometricCurve(double tau, int block) {
  return std::vector<double>(std::max(1, block - 1), PerDepthAcceptance(tau, block));
}

Prediction Predict(const StepCosts& c, std::span<const double> accept_at_depth, int block) {
  if (!(c.step_ms > 0) || c.draft_ms < 0 || c.slope < 0 || c.pick_ms < 0 || c.append_ms < 0) {
    Fail("cost model: step ", c.step_ms, " ms, draft ", c.draft_ms, " ms, slope ", c.slope, ", pick ", c.pick_ms,
         " ms, append ", c.append_ms, " ms are not valid costs");
  }
  if (c.moe.experts > 0 && (c.moe.top_k < 1 || c.moe.top_k > c.moe.experts || !(c.moe.share >= 0 && c.moe.share < 1))) {
    Fail("cost model: top-", c.moe.top_k, " of ", c.moe.experts, " experts with an expert share of ", c.moe.share,
         " is not a valid expert term");
  }
  if (block < 2) Fail("cost model: a DFlash block has at least 2 rows, got ", block);
  const auto expected = [&](int rows) { return ExpectedTokens(accept_at_depth, rows); };
  Prediction p;
  p.tau = expected(block);
  p.plain_tok_s = 1e3 / PlainStepMs(c);
  p.full_block_tok_s = 1e3 * CycleTokensPerMs(c, p.tau, block);
  const int rows = BestVerifyRows(c, block, expected);
  const double rate = 1e3 * CycleTokensPerMs(c, expected(rows), rows);
  p.adaptive_tok_s = std::max(rate, p.plain_tok_s);
  p.best_rows = rate > p.plain_tok_s ? rows : 1;
  return p;
}

}  // namespace dflash::plan
