// Activation rows quantised (by ops/matmul_quant.cc, per SIMD target) for integer dot products
// against block-quantised weights.
//
// Each row is cut into 32-element blocks; block b gets d_b = max|x| / 127 and codes
// q = round(x / d_b) in [-127, 127], so |x - d_b * q| <= d_b / 2. The VNNI kernels multiply
// unsigned weight codes (Q8_0's shifted by +128, Q4_0's carry +8, Q6_K's +32) by these signed
// codes, so each integer sum starts at -offset * (sum of the x codes it covers), which makes
// the unsigned x signed products exact. Everything here is a function of one row, which keeps
// quantised MatMul batch-invariant.
//
// The AMX path (several rows, see ops/amx.h) reads the codes of 16 rows at a time as a tile
// operand, so `codes` has room for `rows` rounded up to 16 (`tile_rows`); the extra rows are
// zero codes whose results are never stored.
#pragma once

#include <cstdint>
#include <vector>

namespace dflash::ops {

struct QuantizedRows {
  int64_t rows = 0;
  int64_t k = 0;      // elements per row
  int64_t k_pad = 0;  // k rounded up to 64; the padding is zero codes with zero scales
  int64_t tile_rows = 0;             // rows, or rows rounded up to 16 for the AMX path
  std::vector<int8_t> codes;         // [tile_rows][k_pad]
  std::vector<int32_t> init16;       // [rows][k_pad / 16] -offset * sum of 16 codes
  std::vector<int32_t> init32;       // [rows][k_pad / 32] the same over a 32-element block
  std::vector<float> block_scale;    // [rows][k_pad / 32] d_b
  std::vector<float> block_sum;      // [rows][k_pad / 32] sum of the block's f32 inputs

  const int8_t* Codes(int64_t r) const { return codes.data() + r * k_pad; }
  const int32_t* Init16(int64_t r) const { return init16.data() + r * (k_pad / 16); }
  const int32_t* Init32(int64_t r) const { return init32.data() + r * (k_pad / 32); }
  const float* BlockScale(int64_t r) const { return block_scale.data() + r * (k_pad / 32); }
  const float* BlockSum(int64_t r) const { return block_sum.data() + r * (k_pad / 32); }
};

}  // namespace dflash::ops
