// Load-time weight quantisation to Q8_0 / Q4_0, bit-exact with the gguf package's quantize()
// (the reference llama.cpp's converter uses): the same f32 scale arithmetic, the f32 scale used
// for the codes and only then rounded to f16 for storage.
#include <cmath>
#include <vector>

#include "core/error.h"
#include "ops/ops.h"
#include "ops/quant_blocks.h"

namespace dflash::ops {

namespace {

void StoreF16(uint8_t* p, float f) {
  const uint16_t h = F32ToF16(f);
  __builtin_memcpy(p, &h, 2);
}

// d = max|x| / 127, q = round-half-away(x / d).
void QuantizeQ8_0(const float* x, uint8_t* b) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = d == 0.0f ? 0.0f : 1.0f / d;
  StoreF16(b, d);
  for (int j = 0; j < 32; ++j) b[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(std::roundf(x[j] * id)));
}

// d = (the element of largest magnitude, sign kept) / -8, q = min(15, trunc(x / d + 8.5)).
void QuantizeQ4_0(const float* x, uint8_t* b) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < 32; ++j) {
    if (std::fabs(x[j]) > amax) {  // first of equal magnitudes, as numpy's argmax
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  const float d = max / -8.0f;
  const float id = d == 0.0f ? 0.0f : 1.0f / d;
  StoreF16(b, d);
  uint8_t q[32];
  for (int j = 0; j < 32; ++j) {
    const float v = std::trunc(x[j] * id + 8.5f);
    q[j] = static_cast<uint8_t>(std::min(15.0f, std::max(0.0f, v)));
  }
  for (int j = 0; j < 16; ++j) b[2 + j] = static_cast<uint8_t>(q[j] | (q[j + 16] << 4));
}

}  // namespace

void QuantizeRow(const float* x, int64_t cols, DType to, uint8_t* out) {
  void (*block_fn)(const float*, uint8_t*) = nullptr;
  switch (to) {
    case DType::kQ8_0: block_fn = QuantizeQ8_0; break;
    case DType::kQ4_0: block_fn = QuantizeQ4_0; break;
    default: Fail("QuantizeRow: cannot quantise to ", DTypeName(to), " (supported: Q8_0, Q4_0)");
  }
  if (cols % 32 != 0) Fail("QuantizeRow: row length ", cols, " is not a multiple of 32");
  for (int64_t b = 0; b < cols / 32; ++b) block_fn(x + 32 * b, out + b * BlockBytes(to));
}

}  // namespace dflash::ops
