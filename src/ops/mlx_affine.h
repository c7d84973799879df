// MLX affine quantisation (mx.quantize, mode "affine"), in the block layout we repack it to at
// load (io/mlx_quantized.cc). MLX stores a quantised matrix as three tensors:
//   weight  uint32 [rows, cols * bits / 32]  element j of a row at bits (bits*j) % 32 of word
//                                            bits*j / 32 (little end first)
//   scales  f32/bf16/f16 [rows, cols / G]    one per group of G = 32, 64 or 128 elements
//   biases  same as scales
// and an element is x = scale * q + bias, q in [0, 2^bits).
//
// Our block (one per group, any byte offset, so fields are read bytewise):
//   f32 scale | f32 bias | codes
//   8-bit codes: byte j = q[j].
//   4-bit codes: per 32 elements c, 16 bytes; byte i = q[32c + i] | q[32c + 16 + i] << 4,
//                so one 16-byte load gives two runs of 16 consecutive elements.
// Scales and biases are widened to f32 (exact from bf16/f16); x = scale * q + bias is then
// computed in f32, product rounded before the add: mx.dequantize's arithmetic on f32 scales.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/dtype.h"

namespace dflash::mlx {

constexpr int kScaleOffset = 0, kBiasOffset = 4, kCodesOffset = 8;

inline bool IsMlxAffine(DType t) {
  return t == DType::kMlx4G32 || t == DType::kMlx4G64 || t == DType::kMlx4G128 ||
         t == DType::kMlx8G32 || t == DType::kMlx8G64 || t == DType::kMlx8G128;
}

inline int Bits(DType t) {
  return t == DType::kMlx8G32 || t == DType::kMlx8G64 || t == DType::kMlx8G128 ? 8 : 4;
}

// The block dtype for (bits, group size); false when MLX's combination is not one we run.
inline bool BlockType(int bits, int group, DType* out) {
  static constexpr struct {
    int bits, group;
    DType type;
  } kTypes[] = {{4, 32, DType::kMlx4G32}, {4, 64, DType::kMlx4G64}, {4, 128, DType::kMlx4G128},
                {8, 32, DType::kMlx8G32}, {8, 64, DType::kMlx8G64}, {8, 128, DType::kMlx8G128}};
  for (const auto& t : kTypes) {
    if (t.bits == bits && t.group == group) {
      *out = t.type;
      return true;
    }
  }
  return false;
}

inline float LoadF32(const uint8_t* p) {
  float f;
  std::memcpy(&f, p, 4);
  return f;
}

// Code of element e (0 <= e < group) of a block.
inline int Code(const uint8_t* block, int bits, int e) {
  const uint8_t* codes = block + kCodesOffset;
  if (bits == 8) return codes[e];
  const uint8_t b = codes[16 * (e / 32) + e % 16];
  return (e % 32) < 16 ? b & 15 : b >> 4;
}

// Stores code q of element e into a zero-initialised block.
inline void SetCode(uint8_t* block, int bits, int e, int q) {
  uint8_t* codes = block + kCodesOffset;
  if (bits == 8) {
    codes[e] = static_cast<uint8_t>(q);
    return;
  }
  uint8_t& b = codes[16 * (e / 32) + e % 16];
  b = static_cast<uint8_t>(b | ((e % 32) < 16 ? q : q << 4));
}

}  // namespace dflash::mlx
