// Where a target pass spends its time, stage by stage (`dflash bench --verify-cost --profile`):
// the question behind every t(16)/t(1) number is which part of the pass grew with the rows.
#pragma once

#include <array>
#include <chrono>

namespace dflash {

// kExperts: a sparse layer's whole MoE block (router, top-k, every chosen expert's matrices).
// kLinearAttention: a Gated DeltaNet layer's work between its projections (gates, conv,
// delta rule, gated norm): the state cost, which does not grow with the context.
enum class PassStage { kQkv, kAttention, kLinearAttention, kOProj, kGateUp, kDown, kExperts, kLmHead, kOther, kCount };

inline const char* PassStageName(PassStage s) {
  static constexpr const char* kNames[] = {"qkv", "attention", "linear_attn", "o_proj", "gate_up", "down", "experts", "lm_head", "other"};
  return kNames[static_cast<int>(s)];
}

// Milliseconds per stage, summed over the passes profiled.
struct PassProfile {
  std::array<double, static_cast<int>(PassStage::kCount)> ms{};
  // Experts whose weights the passes read: distinct experts per sparse layer, summed over the
  // layers and the passes. A verify's expert cost grows with it, not with its rows.
  double experts_read = 0;
  double& operator[](PassStage s) { return ms[static_cast<int>(s)]; }
  double operator[](PassStage s) const { return ms[static_cast<int>(s)]; }
};

// Charges the time since the previous mark (or construction) to a stage. Every op a pass runs
// is synchronous on the calling thread (the pool joins before returning), so wall time between
// marks is that stage's cost. With no profile it reads no clock.
class StageClock {
 public:
  explicit StageClock(PassProfile* profile) : profile_(profile) {
    if (profile_) last_ = Clock::now();
  }
  void Mark(PassStage stage) {
    if (!profile_) return;
    const Clock::time_point now = Clock::now();
    (*profile_)[stage] += std::chrono::duration<double, std::milli>(now - last_).count();
    last_ = now;
  }

 private:
  using Clock = std::chrono::steady_clock;
  PassProfile* profile_;
  Clock::time_point last_;
};

}  // namespace dflash
