// y = x · Wᵀ for MLX affine W (ops/mlx_affine.h): each group's codes are widened to f32 and
// mapped to scale * q + bias (a multiply, then an add: the same two roundings as
// DequantizeMlxAffineRow), then multiplied into f32 accumulators like the f32 kernel does.
// Activations stay f32: no rounding beyond the weights' own, unlike the GGUF kernels.
//
// Batch invariance: every y[m, n] is one vector accumulator that walks the row's groups in
// order, then a fixed lane reduction, then the bias. Within a 4-bit 32-element chunk the
// order is low nibbles then high nibbles per load, the same for every (m, n) on a target.
//
// Speed: each decoded weight vector feeds R <= 4 x rows (tiles as in ops/matmul.cc), so the
// decode costs little at verify/prefill sizes; at M = 1 it is about as many instructions as
// the multiply itself, on a quarter (4-bit) or half (8-bit) of bf16's memory traffic.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/matmul_mlx.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"

#ifndef DFLASH_OPS_MATMUL_MLX_ONCE
#define DFLASH_OPS_MATMUL_MLX_ONCE
#include <algorithm>

#include "core/error.h"
#include "ops/column_tasks.h"
#include "ops/matmul_mlx.h"
#include "ops/mlx_affine.h"
namespace dflash::ops {
constexpr int64_t kMlxRowTile = 4;
constexpr int64_t kMlxColTile = 4;
constexpr int64_t kMlxRowBlock = 64;
}  // namespace dflash::ops
#endif

HWY_BEFORE_NAMESPACE();
namespace dflash::ops::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// At most 16 lanes, so a 4-bit load of Lanes bytes never crosses a 16-byte half-chunk.
using DF = hn::CappedTag<float, 16>;

template <int Bits, int R, int C>
HWY_NOINLINE void MlxTile(const float* x, int64_t x_stride, const WeightRef& w, int64_t n,
                          int64_t group, float* y, int64_t y_stride) {
  const DF df;
  const hn::RebindToUnsigned<DF> du32;
  const hn::Rebind<uint8_t, DF> du8;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const size_t block_bytes = BlockBytes(w.dtype);
  hn::Vec<DF> acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = hn::Zero(df);
  const uint8_t* rows[C];
  for (int c = 0; c < C; ++c) rows[c] = w.Row(n + c);

  // acc[r][c] += x[r][k0 + 0..N) * (scale_c * codes_c + bias_c)
  auto step = [&](const hn::Vec<hn::RebindToUnsigned<DF>>* codes, const hn::Vec<DF>* scale,
                  const hn::Vec<DF>* bias, int64_t k0) HWY_ATTR {
    hn::Vec<DF> wv[C];
    for (int c = 0; c < C; ++c) wv[c] = hn::Add(hn::Mul(hn::ConvertTo(df, codes[c]), scale[c]), bias[c]);
    for (int r = 0; r < R; ++r) {
      const auto xv = hn::LoadU(df, x + r * x_stride + k0);
      for (int c = 0; c < C; ++c) acc[r][c] = hn::MulAdd(xv, wv[c], acc[r][c]);
    }
  };

  const int64_t groups = w.cols / group;
  for (int64_t g = 0; g < groups; ++g) {
    hn::Vec<DF> scale[C], bias[C];
    const uint8_t* codes[C];
    for (int c = 0; c < C; ++c) {
      const uint8_t* blk = rows[c] + g * block_bytes;
      scale[c] = hn::Set(df, mlx::LoadF32(blk + mlx::kScaleOffset));
      bias[c] = hn::Set(df, mlx::LoadF32(blk + mlx::kBiasOffset));
      codes[c] = blk + mlx::kCodesOffset;
    }
    const int64_t k_group = g * group;
    hn::Vec<hn::RebindToUnsigned<DF>> q[C];
    if constexpr (Bits == 8) {
      for (int64_t e = 0; e < group; e += N) {
        for (int c = 0; c < C; ++c) q[c] = hn::PromoteTo(du32, hn::LoadU(du8, codes[c] + e));
        step(q, scale, bias, k_group + e);
      }
    } else {
      const auto mask = hn::Set(du32, 15u);
      for (int64_t chunk = 0; chunk < group / 32; ++chunk) {
        for (int64_t i = 0; i < 16; i += N) {
          hn::Vec<hn::RebindToUnsigned<DF>> packed[C];
          for (int c = 0; c < C; ++c) packed[c] = hn::PromoteTo(du32, hn::LoadU(du8, codes[c] + 16 * chunk + i));
          for (int c = 0; c < C; ++c) q[c] = hn::And(packed[c], mask);
          step(q, scale, bias, k_group + 32 * chunk + i);
          for (int c = 0; c < C; ++c) q[c] = hn::ShiftRight<4>(packed[c]);
          step(q, scale, bias, k_group + 32 * chunk + 16 + i);
        }
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) y[r * y_stride + c] = hn::GetLane(hn::SumOfLanes(df, acc[r][c]));
}

template <int Bits, int R>
HWY_INLINE void MlxTileCols(int C, const float* x, int64_t x_stride, const WeightRef& w, int64_t n,
                            int64_t group, float* y, int64_t y_stride) {
  switch (C) {
    case 4: return MlxTile<Bits, R, 4>(x, x_stride, w, n, group, y, y_stride);
    case 3: return MlxTile<Bits, R, 3>(x, x_stride, w, n, group, y, y_stride);
    case 2: return MlxTile<Bits, R, 2>(x, x_stride, w, n, group, y, y_stride);
    default: return MlxTile<Bits, R, 1>(x, x_stride, w, n, group, y, y_stride);
  }
}

template <int Bits>
void MlxColumns(const float* x, int64_t M, const WeightRef& w, int64_t n_begin, int64_t n_end, float* y) {
  const int64_t K = w.cols, Nout = w.rows, group = BlockElems(w.dtype);
  for (int64_t m0 = 0; m0 < M; m0 += kMlxRowBlock) {
    const int64_t m_end = std::min(M, m0 + kMlxRowBlock);
    for (int64_t n = n_begin; n < n_end; n += kMlxColTile) {
      const int C = static_cast<int>(std::min(kMlxColTile, n_end - n));
      for (int64_t m = m0; m < m_end; m += kMlxRowTile) {
        const float* xt = x + m * K;
        float* yt = y + m * Nout + n;
        switch (std::min(kMlxRowTile, m_end - m)) {
          case 4: MlxTileCols<Bits, 4>(C, xt, K, w, n, group, yt, Nout); break;
          case 3: MlxTileCols<Bits, 3>(C, xt, K, w, n, group, yt, Nout); break;
          case 2: MlxTileCols<Bits, 2>(C, xt, K, w, n, group, yt, Nout); break;
          default: MlxTileCols<Bits, 1>(C, xt, K, w, n, group, yt, Nout); break;
        }
      }
    }
  }
}

void MatMulMlxImpl(const float* x, int64_t M, const WeightRef& w, const float* bias, float* y,
                   ThreadPool& pool) {
  const bool eight = mlx::Bits(w.dtype) == 8;
  ForColumnTasks(M, w.rows, kMlxColTile, bias, y, pool, [&](int64_t n_begin, int64_t n_end) {
    if (eight) MlxColumns<8>(x, M, w, n_begin, n_end, y);
    else MlxColumns<4>(x, M, w, n_begin, n_end, y);
  });
}

}  // namespace dflash::ops::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace dflash::ops {
HWY_EXPORT(MatMulMlxImpl);

namespace {
void CheckMlxWeight(const WeightRef& w, const char* who) {
  if (!mlx::IsMlxAffine(w.dtype)) Fail(who, ": dtype ", DTypeName(w.dtype), " is not MLX affine");
  if (w.cols % BlockElems(w.dtype) != 0 || w.row_bytes < RowBytes(w.dtype, w.cols)) {
    Fail(who, ": ", DTypeName(w.dtype), " weight of ", w.cols, " columns needs whole groups (",
         BlockElems(w.dtype), ") and ", RowBytes(w.dtype, w.cols), " bytes per row, has ", w.row_bytes);
  }
}
}  // namespace

void MatMulMlxAffine(const float* x, int64_t M, const WeightRef& w, const float* bias, float* y,
                     ThreadPool& pool) {
  CheckMlxWeight(w, "MatMul");
  HWY_DYNAMIC_DISPATCH(MatMulMlxImpl)(x, M, w, bias, y, pool);
}

void DequantizeMlxAffineRow(const WeightRef& w, int64_t row, float* out) {
  CheckMlxWeight(w, "DequantizeRow");
  const int64_t group = BlockElems(w.dtype);
  const int bits = mlx::Bits(w.dtype);
  const size_t block_bytes = BlockBytes(w.dtype);
  const uint8_t* p = w.Row(row);
  for (int64_t g = 0; g < w.cols / group; ++g) {
    const uint8_t* blk = p + g * block_bytes;
    const float scale = mlx::LoadF32(blk + mlx::kScaleOffset);
    const float bias = mlx::LoadF32(blk + mlx::kBiasOffset);
    for (int64_t e = 0; e < group; ++e) {
      const float scaled = scale * static_cast<float>(mlx::Code(blk, bits, static_cast<int>(e)));
      out[g * group + e] = scaled + bias;  // no FMA (-ffp-contract=off): mx.dequantize rounds twice
    }
  }
}

}  // namespace dflash::ops
#endif
