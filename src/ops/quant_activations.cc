#include "ops/quant_activations.h"

#include <algorithm>
#include <cmath>

namespace dflash::ops {

void QuantizeActivations(const float* x, int64_t M, int64_t K, int offset, QuantizedRows& out) {
  out.rows = M;
  out.k = K;
  out.k_pad = (K + 63) / 64 * 64;
  const int64_t kp = out.k_pad;
  // assign() rather than resize(): padding must be zero whatever an earlier call left there.
  out.codes.assign(M * kp, 0);
  out.lane_scale.assign(M * kp / 4, 0.0f);
  out.lane_init.assign(M * kp / 4, 0);
  out.block_scale.assign(M * kp / 32, 0.0f);
  out.block_sum.assign(M * kp / 32, 0.0f);
  for (int64_t r = 0; r < M; ++r) {
    const float* xr = x + r * K;
    int8_t* q = out.codes.data() + r * kp;
    for (int64_t b = 0; b < K / 32; ++b) {
      const float* xb = xr + 32 * b;
      float amax = 0.0f, sum = 0.0f;
      for (int j = 0; j < 32; ++j) {
        amax = std::max(amax, std::fabs(xb[j]));
        sum += xb[j];
      }
      const float d = amax / 127.0f;
      const float id = d == 0.0f ? 0.0f : 1.0f / d;
      for (int j = 0; j < 32; ++j) {
        q[32 * b + j] = static_cast<int8_t>(std::clamp(std::roundf(xb[j] * id), -127.0f, 127.0f));
      }
      out.block_scale[r * kp / 32 + b] = d;
      out.block_sum[r * kp / 32 + b] = sum;
      for (int l = 0; l < 8; ++l) {
        const int64_t lane = r * kp / 4 + 8 * b + l;
        const int8_t* ql = q + 32 * b + 4 * l;
        out.lane_scale[lane] = d;
        out.lane_init[lane] = -offset * (ql[0] + ql[1] + ql[2] + ql[3]);
      }
    }
  }
}

}  // namespace dflash::ops
