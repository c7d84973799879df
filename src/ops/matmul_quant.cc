// y = x · Wᵀ for block-quantised W (Q8_0, Q4_0, Q4_K, Q6_K): integer dot products of int8
// activation codes (ops/quant_activations.h) with the weights' codes, scaled per block.
//
// Numerics. Weights are used exactly as DequantizeRow decodes them; the only approximation is
// the activation rounding, |x - d_b q| <= d_b / 2 with d_b = max|x in block b| / 127, so
// |y - x·W| <= sum_b d_b / 2 * sum_{i in b} |W_i|, plus f32 rounding of the scaled sums.
// The integer part of every block dot is exact, so VNNI and the portable path agree on it.
//
// Batch invariance: every y[m, n] is one f32 accumulator walking the row's sub-blocks in order
// (acc += (w scale * x scale) * exact integer sum, then Q4_K's min term), then the bias; tiles
// and threads only choose which (m, n) share a pass.
//
// Targets: AVX3_DL (Ice Lake, Zen 4 and later; Highway checks AVX512_VNNI for it) computes 16
// output columns per vector: lane c of a code vector holds 4 codes of column c, and one
// vpdpbusd against 4 broadcast activation codes advances all 16 columns. Weights are stored
// that way at load (ops/weight_pack.h), so a block is a few contiguous loads, with no
// transpose or gather at run time. The code vectors then serve up to 16
// activation rows, so a 16-row verify reads and unpacks each weight block once (the decode
// shape, one row, is bound by memory either way). Other targets run a portable scalar path.
//
// AMX (ops/amx.h): with 12 or more rows, Q8_0 and Q4_K use int8 tile dot products instead: the
// packed weights of a block are the B operand as they lie in memory, 16 activation rows the A
// operand, and one instruction computes the block's 16 x 16 integer sums; each output element
// then gets exactly Step()'s f32 operations (ScaleBlock), so the two paths agree bit for bit.
//
// The kernels live per family in *-inl.h files compiled once per SIMD target: the activation
// quantiser (quantize_activations-inl.h), the portable path (matmul_quant_portable-inl.h),
// packed weight columns (matmul_quant_packed-inl.h), VNNI (matmul_quant_vnni-inl.h) and AMX
// (matmul_quant_amx-inl.h); ops/matmul_quant_cpu.h has the CPU-dependent choices. This file
// picks a kernel per weight and splits the columns over the pool.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/matmul_quant.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"
#include "ops/matmul_quant_amx-inl.h"
#include "ops/matmul_quant_portable-inl.h"
#include "ops/matmul_quant_vnni-inl.h"
#include "ops/quantize_activations-inl.h"

#ifndef DFLASH_OPS_MATMUL_QUANT_ONCE
#define DFLASH_OPS_MATMUL_QUANT_ONCE
#include <algorithm>

#include "core/error.h"
#include "ops/amx.h"
#include "ops/column_tasks.h"
#include "ops/matmul_quant.h"
#include "ops/matmul_quant_cpu.h"
#include "ops/quant_activations.h"
#include "ops/quant_blocks.h"
namespace dflash::ops {
// Code offset the activation lanes are pre-biased for (see quant_activations.h).
inline int CodeOffset(DType t) {
  switch (t) {
    case DType::kQ8_0: return 128;
    case DType::kQ4_0: return 8;
    case DType::kQ6_K: return 32;
    default: return 0;  // Q4_K: unsigned codes, its mins are applied separately
  }
}
}  // namespace dflash::ops
#endif

HWY_BEFORE_NAMESPACE();
#if HWY_TARGET == HWY_AVX3_DL
DFLASH_VNNI_AMX_TARGET_BEGIN
#endif
namespace dflash::ops::HWY_NAMESPACE {

void Columns(const QuantizedRows& xq, const WeightRef& w, int64_t n_begin, int64_t n_end, float* y, bool amx) {
#if HWY_TARGET == HWY_AVX3_DL
  if (amx) {
    switch (w.dtype) {
      case DType::kQ8_0: return AmxColumns<Q8_0Amx>(xq, w, n_begin, n_end, y);
      case DType::kQ4_K: return AmxColumns<Q4_KAmx>(xq, w, n_begin, n_end, y);
      default: break;
    }
  }
  switch (w.dtype) {
    case DType::kQ8_0: return Avx3Columns<Q8_0Format>(xq, w, n_begin, n_end, y);
    case DType::kQ4_0: return Avx3Columns<Q4_0Format>(xq, w, n_begin, n_end, y);
    case DType::kQ4_K: return Avx3Columns<Q4_KFormat>(xq, w, n_begin, n_end, y);
    case DType::kQ6_K: return Avx3Columns<Q6_KFormat>(xq, w, n_begin, n_end, y);
    default: break;
  }
#else
  (void)amx;
#endif
  PortableColumns(xq, w, n_begin, n_end, y);
}

// Bit s of amx_mask: output s uses the tile kernel (the caller checked the CPU and the format).
// The outputs' code offsets agree wherever they use one (MatMulQuantized checks).
void MatMulQuantImpl(const float* x, int64_t M, const MatMulOutput* outputs, int count, uint32_t amx_mask,
                     QuantizedRows& xq, ThreadPool& pool) {
  int offset = 0;
  ColumnSegment segments[kMaxSegments];
  for (int s = 0; s < count; ++s) {
    offset = std::max(offset, CodeOffset(outputs[s].w->dtype));
    segments[s] = {outputs[s].w->rows, outputs[s].bias, outputs[s].y};
  }
  QuantizeActivations(x, M, outputs[0].w->cols, offset, xq, pool);
  ForColumnTasks(M, std::span<const ColumnSegment>(segments, count), kQCols, pool,
                 [&](int s, int64_t n_begin, int64_t n_end) {
                   Columns(xq, *outputs[s].w, n_begin, n_end, outputs[s].y, (amx_mask >> s) & 1);
                 });
}

}  // namespace dflash::ops::HWY_NAMESPACE
#if HWY_TARGET == HWY_AVX3_DL
DFLASH_VNNI_AMX_TARGET_END
#endif
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace dflash::ops {
HWY_EXPORT(MatMulQuantImpl);

void MatMulQuantized(const float* x, int64_t M, std::span<const MatMulOutput> outputs, ThreadPool& pool) {
  if (outputs.empty()) return;
  int offset = 0;
  bool offsets_agree = true;
  uint32_t amx_mask = 0;
  for (size_t s = 0; s < outputs.size(); ++s) {
    const WeightRef& w = *outputs[s].w;
    if (!quant::IsBlockQuantized(w.dtype)) Fail("MatMulQuantized: dtype ", DTypeName(w.dtype), " is not block-quantised");
    if (w.cols % BlockElems(w.dtype) != 0 || w.row_bytes < RowBytes(w.dtype, w.cols)) {
      Fail("MatMul: ", DTypeName(w.dtype), " weight of ", w.cols, " columns needs whole blocks (",
           BlockElems(w.dtype), ") and ", RowBytes(w.dtype, w.cols), " bytes per row, has ", w.row_bytes);
    }
    if (w.layout != WeightLayout::kGroups16) {
      Fail("MatMul: ", DTypeName(w.dtype), " weights must be packed first (PackMatrices / ops::PackWeight)");
    }
    const int o = CodeOffset(w.dtype);
    if (o != 0 && offset != 0 && o != offset) offsets_agree = false;
    offset = std::max(offset, o);
    if (M >= kAmxMinRows && HasAmxKernel(w.dtype) && AmxActive()) amx_mask |= 1u << s;
  }
  // Codes quantised for one offset serve only weights of that offset (and Q4_K, which has none).
  if (!offsets_agree || outputs.size() > kMaxSegments) {
    for (const MatMulOutput& o : outputs) MatMulQuantized(x, M, std::span<const MatMulOutput>(&o, 1), pool);
    return;
  }
  // One quantised copy of x per calling thread, reused so decode allocates nothing.
  thread_local QuantizedRows xq;
  HWY_DYNAMIC_DISPATCH(MatMulQuantImpl)(x, M, outputs.data(), static_cast<int>(outputs.size()), amx_mask, xq, pool);
}
}  // namespace dflash::ops
#endif
