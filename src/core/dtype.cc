#include "core/dtype.h"

#include <cstring>

namespace dflash {

std::string_view DTypeName(DType t) {
  switch (t) {
    case DType::kF32: return "F32";
    case DType::kF16: return "F16";
    case DType::kBF16: return "BF16";
    case DType::kI32: return "I32";
    case DType::kI64: return "I64";
    case DType::kU32: return "U32";
    case DType::kU8: return "U8";
    case DType::kQ8_0: return "Q8_0";
    case DType::kQ4_0: return "Q4_0";
    case DType::kQ4_K: return "Q4_K";
    case DType::kQ6_K: return "Q6_K";
    case DType::kMlx4G32: return "MLX4_G32";
    case DType::kMlx4G64: return "MLX4_G64";
    case DType::kMlx4G128: return "MLX4_G128";
    case DType::kMlx8G32: return "MLX8_G32";
    case DType::kMlx8G64: return "MLX8_G64";
    case DType::kMlx8G128: return "MLX8_G128";
  }
  return "?";
}

int64_t BlockElems(DType t) {
  switch (t) {
    case DType::kQ8_0:
    case DType::kQ4_0: return 32;
    case DType::kQ4_K:
    case DType::kQ6_K: return 256;
    case DType::kMlx4G32:
    case DType::kMlx8G32: return 32;
    case DType::kMlx4G64:
    case DType::kMlx8G64: return 64;
    case DType::kMlx4G128:
    case DType::kMlx8G128: return 128;
    default: return 1;
  }
}

size_t BlockBytes(DType t) {
  switch (t) {
    case DType::kF32:
    case DType::kI32:
    case DType::kU32: return 4;
    case DType::kF16:
    case DType::kBF16: return 2;
    case DType::kI64: return 8;
    case DType::kU8: return 1;
    case DType::kQ8_0: return 34;   // f16 scale + 32 x int8
    case DType::kQ4_0: return 18;   // f16 scale + 16 bytes of nibbles
    case DType::kQ4_K: return 144;  // 2 x f16 + 12 bytes scales + 128 bytes nibbles
    case DType::kQ6_K: return 210;  // 128 low + 64 high + 16 scales + f16
    // f32 scale + f32 bias + codes
    case DType::kMlx4G32: return 8 + 16;
    case DType::kMlx4G64: return 8 + 32;
    case DType::kMlx4G128: return 8 + 64;
    case DType::kMlx8G32: return 8 + 32;
    case DType::kMlx8G64: return 8 + 64;
    case DType::kMlx8G128: return 8 + 128;
  }
  return 0;
}

float F16ToF32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while ((mant & 0x400u) == 0) {
        mant <<= 1;
        --exp;
      }
      bits = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t F32ToF16(float f) {
  return static_cast<uint16_t>(__builtin_bit_cast(uint16_t, static_cast<_Float16>(f)));
}

}  // namespace dflash
