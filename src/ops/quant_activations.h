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

// Rows m, m + 1, ... of one group (QuantizedRows::Run): what a kernel reads, each as one
// pointer plus fixed offsets. Row m + i's codes lie 32 * i bytes and its per-block values i
// entries after row m's.
struct QuantizedRun {
  const int8_t* codes;
  const int32_t *init16, *init32;
  const float *scale, *sum;
  int64_t group;  // rows per group: consecutive blocks' entries are this many apart

  // Row m's codes from element k0 (a multiple of 16).
  const int8_t* Codes(int64_t k0) const { return codes + (k0 / 32) * group * 32 + k0 % 32; }
  // Row m's start of the integer sum over the 16 (Init16) or 32 (Init32) elements from k0.
  const int32_t* Init16(int64_t k0) const { return init16 + (k0 / 16) * group; }
  const int32_t* Init32(int64_t k0) const { return init32 + (k0 / 32) * group; }
  // Row m's d_b and sum of inputs of the block holding element k0.
  const float* BlockScale(int64_t k0) const { return scale + (k0 / 32) * group; }
  const float* BlockSum(int64_t k0) const { return sum + (k0 / 32) * group; }
};

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
  // Index of row r's block-0 entry in the per-block arrays; block b's is b * group() further
  // (init16's, per 16 elements, use Base16).
  int64_t Base(int64_t r) const { return (((r >> group_shift) * blocks) << group_shift) + (r & (group() - 1)); }
  int64_t Base16(int64_t r) const { return (((r >> group_shift) * 2 * blocks) << group_shift) + (r & (group() - 1)); }
  QuantizedRun Run(int64_t m) const {
    const int64_t base = Base(m);
    return {codes.data() + 32 * base, init16.data() + Base16(m), init32.data() + base, block_scale.data() + base,
            block_sum.data() + base, group()};
  }
};

}  // namespace dflash::ops
