// The cost model: what a plain decode step, a draft pass and a verify of k rows cost on this
// machine, and what tokens per second plain decoding and DFlash give from those costs and an
// acceptance figure. It lives here alone so that every consumer reads the same model:
//
//   t_verify(k) = t_step * (1 + slope * (k - 1))          (the adaptive policy's own form,
//                                                           spec/policy.h)
//   E[k]        = 1 + a + a^2 + ... + a^(k-1)              tokens a k-row verify commits, for a
//                                                           per-depth acceptance a
//   DFlash rate = max over k of E[k] / (t_draft + t_verify(k)); the adaptive policy decodes
//                 plainly (rate 1 / t_step) when no k beats it.
//
// Where the three costs (t_step, t_draft, slope) come from is the only thing that changes:
// AnalyticCosts derives them from bytes and multiply-adds over measured bandwidth and compute
// peak (uncalibrated); a calibration (issue 34's --calibrate, not built yet) measures them on
// real shapes and passes them to the same Predict.
#pragma once

#include <string>
#include <vector>

#include "plan/memory_model.h"

namespace dflash::plan {

// What the analytic model knows of the machine.
struct MachineRates {
  double bandwidth_gbs = 0;  // streaming read bandwidth, all threads (bench/bandwidth.h)
  double f32_gmacs = 0;      // compute peaks (bench/compute_peak.h)
  double int8_gmacs = 0;     // 0 where the SIMD target has no int8 dot products
};

// The three numbers the adaptive policy measures as it runs (spec/policy.h).
struct StepCosts {
  double step_ms = 0;   // one plain decode step at the context
  double draft_ms = 0;  // one draft pass over a whole block
  double slope = 0;     // (t_verify(k) / t_step - 1) / (k - 1)
};

// Matrix work reaches this fraction of the measured compute peak: an assumption (kernels lose
// time to dequantisation, packing and thread sync), which calibration replaces.
inline constexpr double kComputeEfficiency = 0.5;

// Bytes read and multiply-adds of one target step and one draft pass of a pair in `format`
// at `context`; then time = bytes / bandwidth + rows x MACs / (peak x efficiency).
StepCosts AnalyticCosts(const ModelShape& target, const ModelShape& draft, const WeightFormat& format,
                        int64_t context, int kv_bytes, const MachineRates& machine);

// The per-depth acceptance a whose block of `block` rows commits `tau` tokens per cycle
// (1 + a + ... + a^(block-1) = tau), by bisection; 1 when tau >= block. Acceptance falling
// geometrically with depth is the modelling assumption (z-lab's histograms fall about so).
double PerDepthAcceptance(double tau, int block);
double ExpectedTokens(double a, int rows);  // E[rows]

struct Prediction {
  double plain_tok_s = 0;
  double full_block_tok_s = 0;  // --spec-policy always: every cycle verifies the whole block
  double adaptive_tok_s = 0;    // the adaptive policy: best k, or plain decoding when none pays
  int best_rows = 1;            // the adaptive policy's verify length (1: decodes plainly)
  double acceptance = 0;        // per-depth a
};
Prediction Predict(const StepCosts& costs, double tau, int block);

// The assumptions behind AnalyticCosts and Predict, one sentence each, for reports.
std::vector<std::string> AnalyticAssumptions();

}  // namespace dflash::plan
