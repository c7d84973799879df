// Quantised MatMul's portable path, for SIMD targets without AVX512_VNNI: one weight row decoded
// at a time into signed codes with a scale per 16 elements (and Q4_K's mins per 32), then exact
// integer sums per 16 elements for every activation row.
#if defined(DFLASH_OPS_MATMUL_QUANT_PORTABLE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef DFLASH_OPS_MATMUL_QUANT_PORTABLE_INL_H_
#undef DFLASH_OPS_MATMUL_QUANT_PORTABLE_INL_H_
#else
#define DFLASH_OPS_MATMUL_QUANT_PORTABLE_INL_H_
#endif

#include <cstdint>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "hwy/highway.h"
#include "ops/quant_activations.h"
#include "ops/quant_blocks.h"
#include "ops/weight_pack.h"

HWY_BEFORE_NAMESPACE();
namespace dflash::ops::HWY_NAMESPACE {
using namespace quant;
namespace hn = hwy::HWY_NAMESPACE;

// Portable path: decode one weight row into signed codes with a scale per 16 elements (and
// Q4_K's mins per 32), then exact integer sums per 16 elements for every x row.
struct DecodedRow {
  std::vector<int8_t> codes;  // [K] code - offset
  std::vector<float> scale;   // [K/16]
  std::vector<float> mins;    // [K/32] Q4_K: dmin * m, else empty
  std::vector<uint8_t> row_bytes;  // a packed weight's row, unpacked
};

void DecodeRow(const WeightRef& w, int64_t n, DecodedRow& out) {
  const int64_t K = w.cols;
  const uint8_t* row = nullptr;
  if (w.layout == WeightLayout::kGroups16) {
    out.row_bytes.resize(w.row_bytes);
    UnpackRow(w, n, out.row_bytes.data());
    row = out.row_bytes.data();
  } else {
    row = w.Row(n);
  }
  out.codes.resize(K);
  out.scale.resize(K / 16);
  out.mins.assign(w.dtype == DType::kQ4_K ? K / 32 : 0, 0.0f);
  switch (w.dtype) {
    case DType::kQ8_0:
    case DType::kQ4_0:
      for (int64_t b = 0; b < K / 32; ++b) {
        const uint8_t* blk = row + b * BlockBytes(w.dtype);
        const float d = LoadF16(blk);
        out.scale[2 * b] = out.scale[2 * b + 1] = d;
        for (int j = 0; j < 32; ++j) {
          out.codes[32 * b + j] = w.dtype == DType::kQ8_0 ? static_cast<int8_t>(blk[2 + j])
                                                          : static_cast<int8_t>(Q4_0Code(blk, j) - 8);
        }
      }
      return;
    case DType::kQ4_K:
      for (int64_t b = 0; b < K / 256; ++b) {
        const uint8_t* blk = row + b * kQ4_KBytes;
        const float d = LoadF16(blk), dmin = LoadF16(blk + 2);
        for (int j = 0; j < 8; ++j) {
          int sc, m;
          Q4KScaleMin(blk + kQ4_KScales, j, &sc, &m);
          out.scale[16 * b + 2 * j] = out.scale[16 * b + 2 * j + 1] = d * static_cast<float>(sc);
          out.mins[8 * b + j] = dmin * static_cast<float>(m);
        }
        for (int e = 0; e < 256; ++e) out.codes[256 * b + e] = static_cast<int8_t>(Q4KCode(blk, e));
      }
      return;
    case DType::kQ6_K:
      for (int64_t b = 0; b < K / 256; ++b) {
        const uint8_t* blk = row + b * kQ6_KBytes;
        const float d = LoadF16(blk + kQ6_KD);
        const auto* sc = reinterpret_cast<const int8_t*>(blk + kQ6_KScales);
        for (int g = 0; g < 16; ++g) out.scale[16 * b + g] = d * static_cast<float>(sc[g]);
        for (int e = 0; e < 256; ++e) out.codes[256 * b + e] = static_cast<int8_t>(Q6KCode(blk, e) - 32);
      }
      return;
    default:
      Fail("MatMul: dtype ", DTypeName(w.dtype), " is not block-quantised");
  }
}

float PortableDot(const DecodedRow& wr, const QuantizedRows& xq, int64_t m) {
  const QuantizedRun x = xq.Run(m);
  float acc = 0.0f;
  for (int64_t g = 0; g < xq.k / 16; ++g) {
    const int8_t* q = x.Codes(16 * g);
    int32_t sum = 0;
    for (int j = 0; j < 16; ++j) sum += int32_t{wr.codes[16 * g + j]} * q[j];
    acc += wr.scale[g] * *x.BlockScale(16 * g) * static_cast<float>(sum);
    if (!wr.mins.empty() && g % 2 == 1) acc -= wr.mins[g / 2] * *x.BlockSum(16 * g);
  }
  return acc;
}

void PortableColumns(const QuantizedRows& xq, const WeightRef& w, int64_t n_begin, int64_t n_end,
                     float* y) {
  DecodedRow wr;
  for (int64_t n = n_begin; n < n_end; ++n) {
    DecodeRow(w, n, wr);
    for (int64_t m = 0; m < xq.rows; ++m) y[m * w.rows + n] = PortableDot(wr, xq, m);
  }
}

}  // namespace dflash::ops::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard toggle
