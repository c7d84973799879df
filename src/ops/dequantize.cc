// Row dequantisation: embedding lookups and the reference every quantised kernel is tested
// against. Runs once per token per table, so plain scalar code is fast enough.
#include "core/error.h"
#include "ops/ops.h"

namespace dflash::ops {

void DequantizeRow(const WeightRef& w, int64_t row, float* out) {
  if (row < 0 || row >= w.rows) Fail("DequantizeRow: row ", row, " out of range [0, ", w.rows, ")");
  const uint8_t* p = w.Row(row);
  switch (w.dtype) {
    case DType::kF32:
      __builtin_memcpy(out, p, static_cast<size_t>(w.cols) * sizeof(float));
      return;
    case DType::kBF16: {
      const auto* h = reinterpret_cast<const uint16_t*>(p);
      for (int64_t i = 0; i < w.cols; ++i) out[i] = BF16ToF32(h[i]);
      return;
    }
    case DType::kF16: {
      const auto* h = reinterpret_cast<const uint16_t*>(p);
      for (int64_t i = 0; i < w.cols; ++i) out[i] = F16ToF32(h[i]);
      return;
    }
    default:
      Fail("DequantizeRow: dtype ", DTypeName(w.dtype), " is not supported yet");
  }
}

}  // namespace dflash::ops
