// y = x · Wᵀ (+ bias) for f32 activations and f32/bf16/f16 weights (block-quantised weights:
// ops/matmul_quant.cc). BF16 weights that allow it (WeightRef::bf16_activations) use native
// bf16 dot products on AVX512_BF16 CPUs, see MatMulBf16Dot.
//
// Batch invariance by construction: every output y[m, n] is ONE vector accumulator that walks
// k in Lanes-sized steps from 0 upwards, then a fixed lane reduction, then the scalar tail,
// then the bias. Tiling (how many x rows and W rows share a pass) and threading only decide
// which (m, n) pairs are computed together, never the order of any sum, so a row gives the
// same bits alone (decode), among 16 verify rows, or inside any prefill chunk.
//
// Speed comes from the tiles: kRowTile x rows are multiplied against kColTile weight rows per
// pass, so each weight vector loaded from memory feeds up to kRowTile FMAs (the small-M verify
// shape reads W once for all its rows), and independent accumulators hide FMA latency.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/matmul.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"
#include "ops/weight_load-inl.h"

#ifndef DFLASH_OPS_MATMUL_ONCE
#define DFLASH_OPS_MATMUL_ONCE
#include <algorithm>
#include <vector>

#include "core/error.h"
#include "ops/column_tasks.h"
#include "ops/cpu_features.h"
#include "ops/matmul_mlx.h"
#include "ops/matmul_quant.h"
#include "ops/mlx_affine.h"
#include "ops/ops.h"
#include "ops/quant_blocks.h"
namespace dflash::ops {
// Rows of x and of W per register tile (4 x 4 accumulators fit every x86/ARM target).
constexpr int64_t kRowTile = 4;
constexpr int64_t kColTile = 4;
// x rows kept hot in cache while a task streams its weight rows.
constexpr int64_t kRowBlock = 64;
}  // namespace dflash::ops
#endif

HWY_BEFORE_NAMESPACE();
namespace dflash::ops::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// y[r, c] for r < R rows of x (x_stride apart) and c < C weight rows (w_stride elements apart).
template <class Weights, int R, int C>
HWY_NOINLINE void DotTile(const float* x, int64_t x_stride, const typename Weights::T* w,
                          int64_t w_stride, int64_t K, float* y, int64_t y_stride) {
  const hn::ScalableTag<float> d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  hn::Vec<decltype(d)> acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = hn::Zero(d);
  int64_t k = 0;
  for (; k + N <= K; k += N) {
    hn::Vec<decltype(d)> wv[C];
    for (int c = 0; c < C; ++c) wv[c] = Weights::Load(d, w + c * w_stride + k);
    for (int r = 0; r < R; ++r) {
      const auto xv = hn::LoadU(d, x + r * x_stride + k);
      for (int c = 0; c < C; ++c) acc[r][c] = hn::MulAdd(xv, wv[c], acc[r][c]);
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < C; ++c) {
      float sum = hn::GetLane(hn::SumOfLanes(d, acc[r][c]));
      for (int64_t t = k; t < K; ++t) sum += x[r * x_stride + t] * Weights::Scalar(w + c * w_stride + t);
      y[r * y_stride + c] = sum;
    }
  }
}

template <class Weights, int R>
HWY_INLINE void DotRowsCols(int C, const float* x, int64_t x_stride, const typename Weights::T* w,
                            int64_t w_stride, int64_t K, float* y, int64_t y_stride) {
  switch (C) {
    case 4: return DotTile<Weights, R, 4>(x, x_stride, w, w_stride, K, y, y_stride);
    case 3: return DotTile<Weights, R, 3>(x, x_stride, w, w_stride, K, y, y_stride);
    case 2: return DotTile<Weights, R, 2>(x, x_stride, w, w_stride, K, y, y_stride);
    default: return DotTile<Weights, R, 1>(x, x_stride, w, w_stride, K, y, y_stride);
  }
}

template <class Weights>
HWY_INLINE void DotBlock(int R, int C, const float* x, int64_t x_stride,
                         const typename Weights::T* w, int64_t w_stride, int64_t K, float* y,
                         int64_t y_stride) {
  switch (R) {
    case 4: return DotRowsCols<Weights, 4>(C, x, x_stride, w, w_stride, K, y, y_stride);
    case 3: return DotRowsCols<Weights, 3>(C, x, x_stride, w, w_stride, K, y, y_stride);
    case 2: return DotRowsCols<Weights, 2>(C, x, x_stride, w, w_stride, K, y, y_stride);
    default: return DotRowsCols<Weights, 1>(C, x, x_stride, w, w_stride, K, y, y_stride);
  }
}

// (GCC only: the per-function target pragma below is GCC's.)
#if HWY_TARGET == HWY_AVX3_DL && HWY_COMPILER_GCC_ACTUAL
#define DFLASH_BF16_DOT 1
// bf16 x bf16 dot products (vdpbf16ps: two products per f32 lane, added to the lane with
// round-to-nearest-even, denormals flushed), for BF16 weights whose WeightRef allows rounding
// x to bf16. AVX3_DL does not imply AVX512_BF16 (Ice Lake lacks it), so callers check the CPU.
// Batch invariance as above: one accumulator per (row, column) walking k in 32-element steps.
#pragma GCC push_options
#pragma GCC target("avx512bf16")

// Rounds `n` floats to bf16 (round to nearest even, as F32ToBF16); pads to 32 with zeros.
void RoundRowToBf16(const float* x, int64_t n, uint16_t* out) {
  int64_t k = 0;
  for (; k + 32 <= n; k += 32) {
    const __m512bh v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + k + 16), _mm512_loadu_ps(x + k));
    _mm512_storeu_si512(out + k, reinterpret_cast<const __m512i&>(v));
  }
  for (; k < n; ++k) out[k] = F32ToBF16(x[k]);
  for (; k % 32 != 0; ++k) out[k] = 0;
}

template <int R, int C>
HWY_NOINLINE void Bf16DotTile(const uint16_t* x, int64_t x_stride, const uint16_t* w,
                              int64_t w_stride, int64_t K, float* y, int64_t y_stride) {
  __m512 acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
  for (int64_t k = 0; k < K; k += 32) {
    // The last step reads only the row's remaining elements (zeros beyond them).
    const __mmask32 mask = K - k >= 32 ? ~__mmask32{0} : (__mmask32{1} << (K - k)) - 1;
    __m512bh wv[C];
    for (int c = 0; c < C; ++c) {
      const __m512i v = _mm512_maskz_loadu_epi16(mask, w + c * w_stride + k);
      wv[c] = reinterpret_cast<const __m512bh&>(v);
    }
    for (int r = 0; r < R; ++r) {
      const __m512i xi = _mm512_loadu_si512(x + r * x_stride + k);  // padded to 32
      const __m512bh xv = reinterpret_cast<const __m512bh&>(xi);
      for (int c = 0; c < C; ++c) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], xv, wv[c]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) y[r * y_stride + c] = _mm512_reduce_add_ps(acc[r][c]);
}
#pragma GCC pop_options

template <int R>
HWY_INLINE void Bf16DotCols(int C, const uint16_t* x, int64_t x_stride, const uint16_t* w,
                            int64_t w_stride, int64_t K, float* y, int64_t y_stride) {
  switch (C) {
    case 4: return Bf16DotTile<R, 4>(x, x_stride, w, w_stride, K, y, y_stride);
    case 3: return Bf16DotTile<R, 3>(x, x_stride, w, w_stride, K, y, y_stride);
    case 2: return Bf16DotTile<R, 2>(x, x_stride, w, w_stride, K, y, y_stride);
    default: return Bf16DotTile<R, 1>(x, x_stride, w, w_stride, K, y, y_stride);
  }
}

void MatMulBf16Dot(const float* x, int64_t M, const WeightRef& w, const float* bias, float* y,
                   ThreadPool& pool) {
  const int64_t K = w.cols, Nout = w.rows;
  const int64_t x_stride = (K + 31) / 32 * 32;
  thread_local std::vector<uint16_t> xb;  // reused: decode allocates nothing
  xb.resize(M * x_stride);
  for (int64_t m = 0; m < M; ++m) RoundRowToBf16(x + m * K, K, xb.data() + m * x_stride);
  const uint16_t* x_bf16 = xb.data();  // the workers' own `xb` is another (thread_local) vector
  const int64_t w_stride = static_cast<int64_t>(w.row_bytes / 2);
  ForColumnTasks(M, Nout, kColTile, bias, y, pool, [&](int64_t n_begin, int64_t n_end) {
    for (int64_t m0 = 0; m0 < M; m0 += kRowBlock) {
      const int64_t m_end = std::min(M, m0 + kRowBlock);
      for (int64_t n = n_begin; n < n_end; n += kColTile) {
        const int C = static_cast<int>(std::min(kColTile, n_end - n));
        const uint16_t* wrow = reinterpret_cast<const uint16_t*>(w.Row(n));
        for (int64_t m = m0; m < m_end; m += kRowTile) {
          const uint16_t* xt = x_bf16 + m * x_stride;
          float* yt = y + m * Nout + n;
          switch (std::min(kRowTile, m_end - m)) {
            case 4: Bf16DotCols<4>(C, xt, x_stride, wrow, w_stride, K, yt, Nout); break;
            case 3: Bf16DotCols<3>(C, xt, x_stride, wrow, w_stride, K, yt, Nout); break;
            case 2: Bf16DotCols<2>(C, xt, x_stride, wrow, w_stride, K, yt, Nout); break;
            default: Bf16DotCols<1>(C, xt, x_stride, wrow, w_stride, K, yt, Nout); break;
          }
        }
      }
    }
  });
}
#endif  // DFLASH_BF16_DOT

template <class Weights>
void MatMulTyped(const float* x, int64_t M, const WeightRef& w, const float* bias, float* y,
                 ThreadPool& pool) {
  using T = typename Weights::T;
  const int64_t K = w.cols, Nout = w.rows;
  const int64_t w_stride = static_cast<int64_t>(w.row_bytes / sizeof(T));
  ForColumnTasks(M, Nout, kColTile, bias, y, pool, [&](int64_t n_begin, int64_t n_end) {
    for (int64_t m0 = 0; m0 < M; m0 += kRowBlock) {
      const int64_t m_end = std::min(M, m0 + kRowBlock);
      for (int64_t n = n_begin; n < n_end; n += kColTile) {
        const int C = static_cast<int>(std::min(kColTile, n_end - n));
        const T* wrow = reinterpret_cast<const T*>(w.Row(n));
        for (int64_t m = m0; m < m_end; m += kRowTile) {
          const int R = static_cast<int>(std::min(kRowTile, m_end - m));
          DotBlock<Weights>(R, C, x + m * K, K, wrow, w_stride, K, y + m * Nout + n, Nout);
        }
      }
    }
  });
}

void MatMulImpl(const float* x, int64_t M, const WeightRef& w, const float* bias, float* y,
                ThreadPool& pool) {
  switch (w.dtype) {
    case DType::kF32: return MatMulTyped<F32Weights>(x, M, w, bias, y, pool);
    case DType::kBF16:
#ifdef DFLASH_BF16_DOT
      if (w.bf16_activations && CpuHasAvx512Bf16()) return MatMulBf16Dot(x, M, w, bias, y, pool);
#endif
      return MatMulTyped<BF16Weights>(x, M, w, bias, y, pool);
    case DType::kF16: return MatMulTyped<F16Weights>(x, M, w, bias, y, pool);
    default: Fail("MatMul: weights of dtype ", DTypeName(w.dtype), " are not supported yet");
  }
}
#undef DFLASH_BF16_DOT  // this file is compiled again for the next target

}  // namespace dflash::ops::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace dflash::ops {
HWY_EXPORT(MatMulImpl);

void MatMul(const float* x, int64_t M, const WeightRef& w, const float* bias, float* y,
            ThreadPool& pool) {
  if (quant::IsBlockQuantized(w.dtype)) {
    const MatMulOutput output{&w, bias, y};
    return MatMulQuantized(x, M, std::span<const MatMulOutput>(&output, 1), pool);
  }
  if (mlx::IsMlxAffine(w.dtype)) return MatMulMlxAffine(x, M, w, bias, y, pool);
  HWY_DYNAMIC_DISPATCH(MatMulImpl)(x, M, w, bias, y, pool);
}

void MatMulShared(const float* x, int64_t M, std::span<const MatMulOutput> outputs, ThreadPool& pool) {
  bool quantized = true;
  for (const MatMulOutput& o : outputs) {
    if (o.w->cols != outputs[0].w->cols) {
      Fail("MatMulShared: weights of ", o.w->cols, " and ", outputs[0].w->cols, " columns cannot share x");
    }
    quantized = quantized && quant::IsBlockQuantized(o.w->dtype);
  }
  if (quantized) return MatMulQuantized(x, M, outputs, pool);
  for (const MatMulOutput& o : outputs) MatMul(x, M, *o.w, o.bias, o.y, pool);
}
}  // namespace dflash::ops
#endif
