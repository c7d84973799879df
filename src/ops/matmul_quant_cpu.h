// Shapes and CPU-dependent choices of the quantised MatMul kernels (ops/matmul_quant.cc): tile
// sizes, when the AMX tiles beat VNNI, when one row asks for weight lines ahead, and the
// instruction sets the AVX3_DL kernels are compiled for.
#pragma once

#include <cpuid.h>

#include <cstdint>

#include "core/dtype.h"

namespace dflash::ops {
// Output columns per vector (16 f32 / int32 lanes) and the most activation rows per pass.
constexpr int64_t kQCols = 16;
constexpr int64_t kQRowTile = 16;

// Formats with a tile kernel, and the fewest rows for which it beats VNNI. A tile block costs
// the same for 1 or 16 rows; on the 2-vCPU Xeon this was tuned on, 1024x3072, 1 thread
// (bench/matmul_bench.cc): 8 rows 650-740 us tiles vs 420-500 VNNI, 16 rows 690-710 vs 750-1000.
inline bool HasAmxKernel(DType t) { return t == DType::kQ8_0 || t == DType::kQ4_K; }
constexpr int64_t kAmxMinRows = 12;
// The CPU's family as CPUID reports it (base family plus extended family).
inline unsigned CpuFamily() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return 0;
  const unsigned base = (eax >> 8) & 0xF;
  return base == 0xF ? base + ((eax >> 20) & 0xFF) : base;
}
// Whether one activation row asks for weight lines ahead as several rows do (see GroupRows):
// on Intel and on AMD from family 26 (Zen 5), where it measured faster; the EPYC of 2026-12-04,
// whose family went unrecorded, measured it slower, so earlier AMD families do not ask.
inline bool PrefetchOneRow() {
  static const bool ask = __builtin_cpu_is("intel") || (__builtin_cpu_is("amd") && CpuFamily() >= 26);
  return ask;
}
}  // namespace dflash::ops

// The AVX3_DL target's quantised kernels also use VNNI and AMX instructions (AVX3_DL implies
// AVX512_VNNI; the tile path runs only where amx.h says the CPU has it). Opened after
// HWY_BEFORE_NAMESPACE, closed before HWY_AFTER_NAMESPACE, which pops GCC's target again.
#if defined(__clang__)
#define DFLASH_VNNI_AMX_TARGET_BEGIN \
  _Pragma("clang attribute push(__attribute__((target(\"avx512vnni,amx-tile,amx-int8\"))), apply_to = function)")
#define DFLASH_VNNI_AMX_TARGET_END _Pragma("clang attribute pop")
#else
#define DFLASH_VNNI_AMX_TARGET_BEGIN _Pragma("GCC target(\"avx512vnni,amx-tile,amx-int8\")")
#define DFLASH_VNNI_AMX_TARGET_END
#endif
