// Compute-peak probe: kChains independent accumulators, each updated once per step by one
// vector FMA (or one VNNI or bf16 dot product), so the loop is bound by issue throughput, not latency.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "bench/compute_peak.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"

#ifndef DFLASH_BENCH_COMPUTE_PEAK_ONCE
#define DFLASH_BENCH_COMPUTE_PEAK_ONCE
#include <algorithm>
#include <atomic>
#include <chrono>

#include "bench/compute_peak.h"
#include "core/error.h"
#include "ops/cpu_features.h"
namespace dflash {
// Twelve chains cover a 4-cycle latency at three issues per cycle.
constexpr int kChains = 12;
}  // namespace dflash
#endif

HWY_BEFORE_NAMESPACE();
#if HWY_TARGET == HWY_AVX3_DL
#if HWY_COMPILER_CLANG
#pragma clang attribute push(__attribute__((target("avx512vnni"))), apply_to = function)
#else
#pragma GCC target("avx512vnni")
#endif
#endif
namespace dflash::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Runs `steps` steps of f32 FMAs; returns the multiply-adds done (the sum keeps the loop alive).
double FmaLoop(int64_t steps, float seed, float* sink) {
  const hn::ScalableTag<float> d;
  const auto a = hn::Set(d, 1.0f + seed * 1e-7f), b = hn::Set(d, 1.0f - seed * 1e-7f);
  hn::Vec<decltype(d)> acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = hn::Set(d, static_cast<float>(c));
  for (int64_t s = 0; s < steps; ++s) {
#pragma GCC unroll 12
    for (int c = 0; c < kChains; ++c) acc[c] = hn::MulAdd(acc[c], a, b);
  }
  auto sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = hn::Add(sum, acc[c]);
  *sink = hn::GetLane(hn::SumOfLanes(d, sum));
  return static_cast<double>(steps) * kChains * hn::Lanes(d);
}

// The same with int8 dot products (4 multiply-adds per int32 lane); 0 without VNNI.
double Int8DotLoop(int64_t steps, float seed, float* sink) {
#if HWY_TARGET == HWY_AVX3_DL
  const __m512i a = _mm512_set1_epi8(static_cast<char>(1 + static_cast<int>(seed) % 3)), b = _mm512_set1_epi8(3);
  __m512i acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_epi32(c);
  for (int64_t s = 0; s < steps; ++s) {
#pragma GCC unroll 12
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_dpbusd_epi32(acc[c], a, b);
  }
  __m512i sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm512_add_epi32(sum, acc[c]);
  // The sums wrap on long probes: fold the lanes with OR, which cannot overflow (a signed add
  // reduction is undefined behaviour there, and UBSan says so).
  *sink = static_cast<float>(_mm512_reduce_or_epi32(sum));
  return static_cast<double>(steps) * kChains * 64;
#else
  *sink = seed;
  (void)steps;
  return 0;
#endif
}

#if HWY_TARGET == HWY_AVX3_DL
__attribute__((target("avx512f,avx512bf16"))) double Bf16DotSteps(int64_t steps, float seed, float* sink) {
  const __m512bh a = reinterpret_cast<__m512bh>(_mm512_set1_epi16(static_cast<short>(0x3F80 + static_cast<int>(seed) % 3)));
  const __m512bh b = reinterpret_cast<__m512bh>(_mm512_set1_epi16(0x3F7F));
  __m512 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(static_cast<float>(c));
  for (int64_t s = 0; s < steps; ++s) {
#pragma GCC unroll 12
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_dpbf16_ps(acc[c], a, b);
  }
  __m512 sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm512_add_ps(sum, acc[c]);
  *sink = _mm512_reduce_add_ps(sum);
  return static_cast<double>(steps) * kChains * 32;
}
#endif

// The same with bf16 dot products (2 multiply-adds per f32 lane); 0 where the CPU has none.
double Bf16DotLoop(int64_t steps, float seed, float* sink) {
#if HWY_TARGET == HWY_AVX3_DL
  if (ops::CpuHasAvx512Bf16()) return Bf16DotSteps(steps, seed, sink);
#endif
  *sink = seed;
  (void)steps;
  return 0;
}

}  // namespace dflash::HWY_NAMESPACE
#if HWY_TARGET == HWY_AVX3_DL && HWY_COMPILER_CLANG
#pragma clang attribute pop
#endif
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace dflash {
HWY_EXPORT(FmaLoop);
HWY_EXPORT(Int8DotLoop);
HWY_EXPORT(Bf16DotLoop);

namespace {
// G multiply-adds per second of `loop` on every pool thread at once, best of `passes`.
template <class Loop>
double PeakGmacs(ThreadPool& pool, int passes, const Loop& loop) {
  constexpr int64_t kSteps = int64_t{1} << 22;  // ~50M instructions per thread: tens of ms
  double best = 0;
  for (int pass = 0; pass <= passes; ++pass) {
    std::atomic<double> macs{0};
    const auto t0 = std::chrono::steady_clock::now();
    pool.ParallelFor(pool.size(), [&](int64_t t) {
      float sink = 0;  // written through the dispatch pointer, so the loop cannot be dropped
      macs.fetch_add(loop(kSteps, static_cast<float>(t + pass), &sink), std::memory_order_relaxed);
    });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (pass > 0) best = std::max(best, macs.load() / s / 1e9);  // pass 0 warms up (clocks, caches)
  }
  return best;
}
}  // namespace

ComputePeak MeasureComputePeak(ThreadPool& pool, int passes) {
  if (passes < 1) Fail("compute peak: passes must be at least 1, got ", passes);
  ComputePeak p;
  p.f32_gmacs = PeakGmacs(pool, passes, [](int64_t steps, float seed, float* sink) {
    return HWY_DYNAMIC_DISPATCH(FmaLoop)(steps, seed, sink);
  });
  p.int8_gmacs = PeakGmacs(pool, passes, [](int64_t steps, float seed, float* sink) {
    return HWY_DYNAMIC_DISPATCH(Int8DotLoop)(steps, seed, sink);
  });
  p.bf16_gmacs = PeakGmacs(pool, passes, [](int64_t steps, float seed, float* sink) {
    return HWY_DYNAMIC_DISPATCH(Bf16DotLoop)(steps, seed, sink);
  });
  return p;
}

}  // namespace dflash
#endif
