// Row dequantisation: embedding lookups and the reference every quantised kernel is tested
// against. Runs once per token per table, so plain scalar code is fast enough. Block formats
// follow ops/quant_blocks.h, with the gguf package's order of float operations.
#include <cstring>
#include <vector>

#include "core/error.h"
#include "ops/matmul_mlx.h"
#include "ops/mlx_affine.h"
#include "ops/ops.h"
#include "ops/quant_blocks.h"
#include "ops/weight_pack.h"

namespace dflash::ops {

namespace {

using namespace quant;

void DequantQ8_0(const uint8_t* b, float* out) {
  const float d = LoadF16(b);
  const auto* q = reinterpret_cast<const int8_t*>(b + 2);
  for (int j = 0; j < 32; ++j) out[j] = static_cast<float>(q[j]) * d;
}

void DequantQ4_0(const uint8_t* b, float* out) {
  const float d = LoadF16(b);
  for (int j = 0; j < 32; ++j) out[j] = d * static_cast<float>(Q4_0Code(b, j) - 8);
}

void DequantQ4_K(const uint8_t* b, float* out) {
  const float d = LoadF16(b), dmin = LoadF16(b + 2);
  for (int j = 0; j < 8; ++j) {
    int sc, m;
    Q4KScaleMin(b + kQ4_KScales, j, &sc, &m);
    const float ds = d * static_cast<float>(sc), dm = dmin * static_cast<float>(m);
    for (int l = 0; l < 32; ++l) {
      const int e = 32 * j + l;
      out[e] = ds * static_cast<float>(Q4KCode(b, e)) - dm;
    }
  }
}

void DequantQ6_K(const uint8_t* b, float* out) {
  const float d = LoadF16(b + kQ6_KD);
  const auto* scales = reinterpret_cast<const int8_t*>(b + kQ6_KScales);
  for (int g = 0; g < 16; ++g) {
    const float ds = d * static_cast<float>(scales[g]);
    for (int l = 0; l < 16; ++l) {
      const int e = 16 * g + l;
      out[e] = ds * static_cast<float>(Q6KCode(b, e) - 32);
    }
  }
}

}  // namespace

void DequantizeRow(const WeightRef& w, int64_t row, float* out) {
  if (row < 0 || row >= w.rows) Fail("DequantizeRow: row ", row, " out of range [0, ", w.rows, ")");
  const uint8_t* p = nullptr;
  if (w.layout == WeightLayout::kGroups16) {
    thread_local std::vector<uint8_t> unpacked;
    unpacked.resize(w.row_bytes);
    UnpackRow(w, row, unpacked.data());
    p = unpacked.data();
  } else {
    p = w.Row(row);
  }
  switch (w.dtype) {
    case DType::kF32:
      __builtin_memcpy(out, p, static_cast<size_t>(w.cols) * sizeof(float));
      return;
    // Rows may start at any byte (MLX writes safetensors headers unpadded): copy, do not cast.
    case DType::kBF16:
      for (int64_t i = 0; i < w.cols; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = BF16ToF32(h);
      }
      return;
    case DType::kF16:
      for (int64_t i = 0; i < w.cols; ++i) out[i] = LoadF16(p + 2 * i);
      return;
    default:
      if (mlx::IsMlxAffine(w.dtype)) return DequantizeMlxAffineRow(w, row, out);
      break;
  }
  void (*block_fn)(const uint8_t*, float*) = nullptr;
  switch (w.dtype) {
    case DType::kQ8_0: block_fn = DequantQ8_0; break;
    case DType::kQ4_0: block_fn = DequantQ4_0; break;
    case DType::kQ4_K: block_fn = DequantQ4_K; break;
    case DType::kQ6_K: block_fn = DequantQ6_K; break;
    default: Fail("DequantizeRow: dtype ", DTypeName(w.dtype), " is not supported");
  }
  const int64_t n = BlockElems(w.dtype);
  const size_t bytes = BlockBytes(w.dtype);
  for (int64_t b = 0; b < w.cols / n; ++b) block_fn(p + b * bytes, out + b * n);
}

}  // namespace dflash::ops
