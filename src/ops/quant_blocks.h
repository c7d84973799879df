// GGUF (ggml) block layouts, byte for byte as llama.cpp writes them, and the scalar helpers that
// decode them. Rows are arrays of blocks at any byte offset (mmap), so fields are read bytewise.
//
//   Q8_0 (32 elems, 34 B):  f16 d | int8 q[32]                      x = d * q
//   Q4_0 (32 elems, 18 B):  f16 d | u8 qs[16]   q[j] = qs[j] & 15, q[j+16] = qs[j] >> 4;
//                                                                     x = d * (q - 8)
//   Q4_K (256 elems, 144 B): f16 d | f16 dmin | u8 scales[12] | u8 qs[128]
//        eight 32-element sub-blocks with 6-bit scale sc and min m: x = (d*sc) * q - dmin*m;
//        qs[32c + l] holds q of element 64c + l (low nibble) and 64c + 32 + l (high nibble)
//   Q6_K (256 elems, 210 B): u8 ql[128] | u8 qh[64] | int8 scales[16] | f16 d
//        sixteen 16-element groups with scale sc: x = (d*sc) * (q - 32), q 6 bits:
//        per 128-element half h (ql += 64h, qh += 32h), for l < 32:
//        q[l]    = ql[l]    & 15 | (qh[l]      & 3) << 4
//        q[l+32] = ql[l+32] & 15 | (qh[l] >> 2 & 3) << 4
//        q[l+64] = ql[l]    >> 4 | (qh[l] >> 4 & 3) << 4
//        q[l+96] = ql[l+32] >> 4 | (qh[l] >> 6 & 3) << 4
// The order of each float operation above is the gguf package's, which DequantizeRow matches
// bit for bit.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/dtype.h"

namespace dflash::quant {

constexpr int kQ8_0Bytes = 34, kQ4_0Bytes = 18, kQ4_KBytes = 144, kQ6_KBytes = 210;
// Offsets inside a block.
constexpr int kQ4_KScales = 4, kQ4_KQs = 16;
constexpr int kQ6_KQh = 128, kQ6_KScales = 192, kQ6_KD = 208;

inline float LoadF16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return F16ToF32(h);
}

// Q4_K sub-block j's 6-bit scale and min from the 12 packed bytes.
inline void Q4KScaleMin(const uint8_t* s, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// The 6-bit value of element e (0..255) of a Q6_K block, before subtracting 32.
inline int Q6KCode(const uint8_t* block, int e) {
  const uint8_t* ql = block + 64 * (e / 128);
  const uint8_t* qh = block + kQ6_KQh + 32 * (e / 128);
  const int l = e % 32, quarter = (e % 128) / 32;
  const int low = quarter & 1 ? ql[l + 32] : ql[l];
  const int nibble = quarter >= 2 ? low >> 4 : low & 15;
  return nibble | (((qh[l] >> (2 * quarter)) & 3) << 4);
}

// Writes the ql and qh fields of a Q6_K block from its 256 6-bit values (Q6KCode's inverse).
inline void EncodeQ6KCodes(const uint8_t* q, uint8_t* block) {
  for (int h = 0; h < 2; ++h) {
    const uint8_t* qq = q + 128 * h;
    uint8_t* ql = block + 64 * h;
    uint8_t* qh = block + kQ6_KQh + 32 * h;
    for (int l = 0; l < 32; ++l) {
      ql[l] = static_cast<uint8_t>((qq[l] & 15) | (qq[l + 64] & 15) << 4);
      ql[l + 32] = static_cast<uint8_t>((qq[l + 32] & 15) | (qq[l + 96] & 15) << 4);
      qh[l] = static_cast<uint8_t>(qq[l] >> 4 | (qq[l + 32] >> 4) << 2 | (qq[l + 64] >> 4) << 4 | (qq[l + 96] >> 4) << 6);
    }
  }
}

// The 4-bit value of element j (0..31) of a Q4_0 block.
inline int Q4_0Code(const uint8_t* block, int j) {
  const uint8_t b = block[2 + j % 16];
  return j < 16 ? b & 15 : b >> 4;
}

// The 4-bit value of element e (0..255) of a Q4_K block.
inline int Q4KCode(const uint8_t* block, int e) {
  const uint8_t b = block[kQ4_KQs + 32 * (e / 64) + e % 32];
  return (e % 64) < 32 ? b & 15 : b >> 4;
}

inline bool IsBlockQuantized(DType t) {
  return t == DType::kQ8_0 || t == DType::kQ4_0 || t == DType::kQ4_K || t == DType::kQ6_K;
}

}  // namespace dflash::quant
