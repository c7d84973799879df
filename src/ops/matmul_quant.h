// MatMul for block-quantised weights (ops/matmul_quant.cc); ops::MatMul routes here.
#pragma once

#include <cstdint>
#include <span>

#include "core/tensor.h"
#include "core/thread_pool.h"
#include "ops/ops.h"

namespace dflash::ops {

// The products of MatMulShared, all of block-quantised weights.
void MatMulQuantized(const float* x, int64_t M, std::span<const MatMulOutput> outputs, ThreadPool& pool);

}  // namespace dflash::ops
