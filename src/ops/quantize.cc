// Load-time weight quantisation. Q8_0 / Q4_0 are bit-exact with the gguf package's quantize()
// (the reference llama.cpp's converter uses): the same f32 scale arithmetic, the f32 scale used
// for the codes and only then rounded to f16 for storage. Q4_K (which the gguf package cannot
// write) uses a plain min/max fit per 32-element sub-block, not llama.cpp's iterative search:
// it exists to run Q4_K kernels on any checkpoint, and its error bound is tested.
#include <algorithm>
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

// roundf(v) (half away from zero) for |v| <= 127 without a libm call per element, so the loop
// vectorises: v - trunc(v) is exact, and a fraction of at least one half rounds outwards.
inline int RoundHalfAway(float v) {
  const int t = static_cast<int>(v);
  const float frac = v - static_cast<float>(t);
  return t + (frac >= 0.5f) - (frac <= -0.5f);
}

// d = max|x| / 127, q = round-half-away(x / d).
void QuantizeQ8_0(const float* x, uint8_t* b) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = d == 0.0f ? 0.0f : 1.0f / d;
  StoreF16(b, d);
  for (int j = 0; j < 32; ++j) b[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(RoundHalfAway(x[j] * id)));
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

// Q4_K super-block of 256: sub-block j covers [lo_j, hi_j] with lo_j <= 0 as
// x = (d * sc_j) * q - (dmin * m_j), q in 0..15; the 6-bit sc_j, m_j are the sub-block scale
// and min in units of d = max scale / 63 and dmin = max min / 63 (f16), rounded up so the
// stored range still covers the sub-block. Codes use the stored (rounded) scales.
void QuantizeQ4_K(const float* x, uint8_t* b) {
  float scale[8], min[8], max_scale = 0.0f, max_min = 0.0f;
  for (int j = 0; j < 8; ++j) {
    float lo = 0.0f, hi = 0.0f;
    for (int i = 0; i < 32; ++i) {
      lo = std::min(lo, x[32 * j + i]);
      hi = std::max(hi, x[32 * j + i]);
    }
    min[j] = -lo;
    scale[j] = (hi - lo) / 15.0f;
    max_scale = std::max(max_scale, scale[j]);
    max_min = std::max(max_min, min[j]);
  }
  StoreF16(b, max_scale / 63.0f);
  StoreF16(b + 2, max_min / 63.0f);
  const float d = quant::LoadF16(b), dmin = quant::LoadF16(b + 2);
  int sc[8], m[8];
  for (int j = 0; j < 8; ++j) {
    sc[j] = d > 0.0f ? std::min(63, static_cast<int>(std::ceil(scale[j] / d))) : 0;
    m[j] = dmin > 0.0f ? std::min(63, static_cast<int>(std::ceil(min[j] / dmin))) : 0;
  }
  uint8_t* s = b + quant::kQ4_KScales;  // the packing Q4KScaleMin reads
  for (int j = 0; j < 4; ++j) {
    s[j] = static_cast<uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    s[j + 4] = static_cast<uint8_t>((m[j] & 63) | ((m[j + 4] >> 4) << 6));
    s[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
  }
  uint8_t q[256];
  for (int j = 0; j < 8; ++j) {
    const float step = d * static_cast<float>(sc[j]), offset = dmin * static_cast<float>(m[j]);
    const float inv = step > 0.0f ? 1.0f / step : 0.0f;
    for (int i = 0; i < 32; ++i) {
      const float v = std::nearbyint((x[32 * j + i] + offset) * inv);
      q[32 * j + i] = static_cast<uint8_t>(std::clamp(v, 0.0f, 15.0f));
    }
  }
  uint8_t* qs = b + quant::kQ4_KQs;
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l) qs[32 * c + l] = static_cast<uint8_t>(q[64 * c + l] | (q[64 * c + 32 + l] << 4));
}

}  // namespace

void QuantizeRow(const float* x, int64_t cols, DType to, uint8_t* out) {
  void (*block_fn)(const float*, uint8_t*) = nullptr;
  switch (to) {
    case DType::kQ8_0: block_fn = QuantizeQ8_0; break;
    case DType::kQ4_0: block_fn = QuantizeQ4_0; break;
    case DType::kQ4_K: block_fn = QuantizeQ4_K; break;
    default: Fail("QuantizeRow: cannot quantise to ", DTypeName(to), " (supported: Q8_0, Q4_0, Q4_K)");
  }
  const int64_t elems = BlockElems(to);
  if (cols % elems != 0) Fail("QuantizeRow: row length ", cols, " is not a multiple of ", elems);
  for (int64_t b = 0; b < cols / elems; ++b) block_fn(x + elems * b, out + b * BlockBytes(to));
}

}  // namespace dflash::ops
