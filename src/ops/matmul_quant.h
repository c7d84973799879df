// MatMul for block-quantised weights (ops/matmul_quant.cc); ops::MatMul routes here.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "core/thread_pool.h"

namespace dflash::ops {

void MatMulQuantized(const float* x, int64_t M, const WeightRef& w, const float* bias, float* y,
                     ThreadPool& pool);

}  // namespace dflash::ops
