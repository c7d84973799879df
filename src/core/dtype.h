// Element types of stored tensors. Activations are always f32; weights may be any of these.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace dflash {

enum class DType : uint8_t {
  kF32,
  kF16,
  kBF16,
  kI32,
  kI64,
  kU32,  // packed quantised words (MLX affine); meaning comes from the tensor's role
  kU8,
  // Block-quantised formats (GGUF). A row of `cols` elements is cols / BlockElems blocks.
  kQ8_0,
  kQ4_0,
  kQ4_K,
  kQ6_K,
  // MLX affine (ops/mlx_affine.h), repacked at load: one block per quantisation group of
  // 32/64/128 elements holding f32 scale, f32 bias and 4- or 8-bit codes; x = scale * q + bias.
  kMlx4G32,
  kMlx4G64,
  kMlx4G128,
  kMlx8G32,
  kMlx8G64,
  kMlx8G128,
};

std::string_view DTypeName(DType t);

// Elements per quantisation block (1 for plain types).
int64_t BlockElems(DType t);
// Bytes per block (bytes per element for plain types).
size_t BlockBytes(DType t);
// Bytes of a row of `cols` elements; cols must be a multiple of BlockElems.
inline size_t RowBytes(DType t, int64_t cols) {
  return static_cast<size_t>(cols / BlockElems(t)) * BlockBytes(t);
}

// bf16 <-> f32 (round to nearest even, as torch does).
inline float BF16ToF32(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
}
inline uint16_t F32ToBF16(float f) {
  uint32_t u;
  __builtin_memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
float F16ToF32(uint16_t h);
uint16_t F32ToF16(float f);

}  // namespace dflash
