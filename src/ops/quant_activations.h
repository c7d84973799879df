// Activation rows quantised (by ops/matmul_quant.cc, per SIMD target) for integer dot products against block-quantised weights.
//
// Each row is cut into 32-element blocks; block b gets d_b = max|x| / 127 and codes
// q = round(x / d_b) in [-127, 127], so |x - d_b * q| <= d_b / 2. The weights' codes are
// unsigned (Q8_0's are shifted by +128 with an xor, Q4_0's carry +8, Q6_K's +32), so each
// 4-element integer lane of a dot product is started at -offset * (sum of its 4 x codes),
// which makes unsigned x signed products exact. Everything here is a function of one row,
// which keeps quantised MatMul batch-invariant.
#pragma once

#include <cstdint>
#include <vector>

namespace dflash::ops {

struct QuantizedRows {
  int64_t rows = 0;
  int64_t k = 0;      // elements per row
  int64_t k_pad = 0;  // k rounded up to 64; the padding is zero codes with zero scales
  std::vector<int8_t> codes;         // [rows][k_pad]
  std::vector<float> lane_scale;     // [rows][k_pad / 4]  d of the block each 4-lane is in
  std::vector<int32_t> lane_init;    // [rows][k_pad / 4]  -offset * sum of the lane's codes
  std::vector<float> block_scale;    // [rows][k_pad / 32] d_b
  std::vector<float> block_sum;      // [rows][k_pad / 32] sum of the block's f32 inputs

  const int8_t* Codes(int64_t r) const { return codes.data() + r * k_pad; }
  const float* LaneScale(int64_t r) const { return lane_scale.data() + r * (k_pad / 4); }
  const int32_t* LaneInit(int64_t r) const { return lane_init.data() + r * (k_pad / 4); }
  const float* BlockScale(int64_t r) const { return block_scale.data() + r * (k_pad / 32); }
  const float* BlockSum(int64_t r) const { return block_sum.data() + r * (k_pad / 32); }
};

}  // namespace dflash::ops
