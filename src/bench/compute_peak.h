// The compute roofline of this machine: how many multiply-adds per second all pool threads
// together can issue, for the kinds a target pass runs. A one-row decode step is bound by
// memory (bench/bandwidth.h); a 16-row verify of int8-quantised weights runs int8 dot products
// and its attention f32 FMAs, or bf16 dot products over a bf16 cache (ops.h: Bf16DotActive),
// so these peaks say how far the arithmetic of a verify could shrink.
#pragma once

#include "core/thread_pool.h"

namespace dflash {

struct ComputePeak {
  double f32_gmacs = 0;   // G f32 multiply-adds per second (vector FMAs x lanes)
  double int8_gmacs = 0;  // G int8 multiply-adds per second (VNNI dot products); 0 where the
                          // chosen SIMD target has none
  double bf16_gmacs = 0;  // G bf16 multiply-adds per second (AVX512_BF16 dot products); 0
                          // where the CPU or the chosen target has none
};

// Best of `passes` timed runs (after one warm-up) of independent FMA / dot-product chains with
// no memory traffic, one task per pool thread, all at once. Throws Error for passes < 1.
ComputePeak MeasureComputePeak(ThreadPool& pool, int passes = 3);

}  // namespace dflash
