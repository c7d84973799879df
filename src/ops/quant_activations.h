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
// Layout: rows in groups of group() (16, or M rounded up to a power of two when smaller), and
// inside a group block-major: block b of the group's rows lies together, row after row (codes
// 32 bytes apart, each per-block value 4 bytes apart). A kernel running R <= group rows of one
// group reaches every row of a block from one pointer at a fixed offset, so it spends no
// instructions on per-row addresses, and the AMX path loads a block's 16 rows as one tile
// operand. A kernel's rows never straddle groups: it takes 16, 8, 4, 2, 1 rows in turn, so a
// run of R rows starts at a multiple of R. The rows past `rows` in the last group are zero
// codes with zero scales, which the tile path computes and never stores.
#pragma once

#include <cstdint>
#include <vector>

namespace dflash::ops {

struct QuantizedRows {
  int64_t rows = 0;
  int64_t k = 0;        // elements per row, a multiple of 32
  int64_t blocks = 0;   // k / 32
  int group_shift = 0;  // log2 of the rows per group
  std::vector<int8_t> codes;         // [groups][blocks][group][32]
  std::vector<int32_t> init16;       // [groups][2 * blocks][group] -offset * sum of 16 codes
  std::vector<int32_t> init32;       // [groups][blocks][group] the same over a 32-element block
  std::vector<float> block_scale;    // [groups][blocks][group] d_b
  std::vector<float> block_sum;      // [groups][blocks][group] sum of the block's f32 inputs

  int64_t group() const { return int64_t{1} << group_shift; }
  int64_t padded_rows() const { return (rows + group() - 1) >> group_shift << group_shift; }
  // Index of row r's entry for block b in the per-block arrays (x 32: its codes).
  int64_t Slot(int64_t r, int64_t b) const {
    return (((r >> group_shift) * blocks + b) << group_shift) + (r & (group() - 1));
  }
  // The same for init16, whose entries are per 16 elements: the one holding element k0.
  int64_t Slot16(int64_t r, int64_t k0) const {
    return (((r >> group_shift) * 2 * blocks + k0 / 16) << group_shift) + (r & (group() - 1));
  }
  // Row r's codes from element k0 (a multiple of 16); row r + i's lie 32 * i bytes further.
  const int8_t* Codes(int64_t r, int64_t k0) const { return codes.data() + 32 * Slot(r, k0 / 32) + k0 % 32; }
  // Row r's per-block values for the block holding element k0; row r + i's lie i further.
  const int32_t* Init32(int64_t r, int64_t k0) const { return init32.data() + Slot(r, k0 / 32); }
  const int32_t* Init16(int64_t r, int64_t k0) const { return init16.data() + Slot16(r, k0); }
  const float* BlockScale(int64_t r, int64_t k0) const { return block_scale.data() + Slot(r, k0 / 32); }
  const float* BlockSum(int64_t r, int64_t k0) const { return block_sum.data() + Slot(r, k0 / 32); }
};

}  // namespace dflash::ops
