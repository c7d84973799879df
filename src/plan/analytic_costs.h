// The cost model's three costs (plan/cost_model.h) estimated from shapes alone: bytes read over
// the measured bandwidth plus multiply-adds over the measured compute peak. Uncalibrated: the
// planner labels predictions from these so; `plan --calibrate` (plan/calibrate.h) measures them.
#pragma once

#include <string>
#include <vector>

#include "plan/cost_model.h"
#include "plan/memory_model.h"

namespace dflash::plan {

// What the analytic model knows of the machine.
struct MachineRates {
  double bandwidth_gbs = 0;  // streaming read bandwidth, all threads (bench/bandwidth.h)
  double f32_gmacs = 0;      // compute peaks (bench/compute_peak.h)
  double int8_gmacs = 0;     // 0 where the SIMD target has no int8 dot products
};

// Matrix work reaches this fraction of the measured compute peak: an assumption (kernels lose
// time to dequantisation, packing and thread sync), which calibration replaces.
inline constexpr double kComputeEfficiency = 0.5;

// Bytes read and multiply-adds of one target step and one draft pass of a pair in `format`
// at `context`; then time = bytes / bandwidth + rows x MACs / (peak x efficiency).
StepCosts AnalyticCosts(const ModelShape& target, const ModelShape& draft, const WeightFormat& format,
                        int64_t context, int kv_bytes, const MachineRates& machine);

// The assumptions behind AnalyticCosts and the prediction, one sentence each, for reports.
std::vector<std::string> AnalyticAssumptions();

}  // namespace dflash::plan
