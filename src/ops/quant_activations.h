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
// The AMX path (several rows, see ops/amx.h) also wants the codes as tile operands: per tile of
// 16 rows and per 32-block, 512 bytes in which dword k of row r (codes 4k..4k+3) sits at
// [k][r], the B layout of a tile dot product; and the 16 rows' block scales and sums side by
// side. Rows past `rows` in the last tile have zero scales and sums.
#pragma once

#include <cstdint>
#include <vector>

namespace dflash::ops {

struct QuantizedRows {
  int64_t rows = 0;
  int64_t k = 0;      // elements per row
  int64_t k_pad = 0;  // k rounded up to 64; the padding is zero codes with zero scales
  std::vector<int8_t> codes;         // [rows][k_pad]
  std::vector<int32_t> init16;       // [rows][k_pad / 16] -offset * sum of 16 codes
  std::vector<float> block_scale;    // [rows][k_pad / 32] d_b
  std::vector<float> block_sum;      // [rows][k_pad / 32] sum of the block's f32 inputs
  int64_t tiles = 0;                 // 16-row tiles in the layout below; 0 when not built
  std::vector<int8_t> tile_codes;    // [tiles][k_pad / 32][8][16][4]
  std::vector<float> tile_scale;     // [tiles][k_pad / 32][16]
  std::vector<float> tile_sum;       // [tiles][k_pad / 32][16]

  const int8_t* Codes(int64_t r) const { return codes.data() + r * k_pad; }
  const int32_t* Init16(int64_t r) const { return init16.data() + r * (k_pad / 16); }
  const float* BlockScale(int64_t r) const { return block_scale.data() + r * (k_pad / 32); }
  const float* BlockSum(int64_t r) const { return block_sum.data() + r * (k_pad / 32); }
  const int8_t* TileCodes(int64_t t, int64_t b) const { return tile_codes.data() + (t * (k_pad / 32) + b) * 512; }
  const float* TileScale(int64_t t, int64_t b) const { return tile_scale.data() + (t * (k_pad / 32) + b) * 16; }
  const float* TileSum(int64_t t, int64_t b) const { return tile_sum.data() + (t * (k_pad / 32) + b) * 16; }
};

}  // namespace dflash::ops
