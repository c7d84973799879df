// MatMul and row dequantisation for MLX affine weights (ops/mlx_affine.h); ops::MatMul and
// ops::DequantizeRow route here.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "core/thread_pool.h"

namespace dflash::ops {

// y = x · Wᵀ (+ bias) with W's elements scale * q + bias computed in f32 exactly as
// DequantizeMlxAffineRow gives them, so the result differs from an f32 MatMul on the
// dequantised matrix only in summation order. Batch-invariant like every MatMul.
void MatMulMlxAffine(const float* x, int64_t M, const WeightRef& w, const float* bias, float* y,
                     ThreadPool& pool);

// Row `row` of W as f32: bit-exactly mx.dequantize on f32 scales and biases.
void DequantizeMlxAffineRow(const WeightRef& w, int64_t row, float* out);

}  // namespace dflash::ops
