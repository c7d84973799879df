// Scalar tails use std::fma where the vector loops use MulAdd, so the replay of a verify's
// accepted rows (no output) updates the state exactly as the verify did.
// Each output element and state element is reduced over the key dims in one fixed order (i
// ascending), vectorised across the value dims, so rows are batch-invariant.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/delta_rule.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"

#ifndef DFLASH_OPS_DELTA_RULE_ONCE
#define DFLASH_OPS_DELTA_RULE_ONCE
#include <cmath>

#include "ops/delta_rule.h"
#endif

HWY_BEFORE_NAMESPACE();
namespace dflash::ops::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void GatedDeltaRuleImpl(const float* state_in, float* state, int dk, int dv, int n, const float* q, const float* k,
                        int64_t qk_stride, const float* v, int64_t v_stride, const float* decay, const float* beta,
                        int64_t gb_stride, float* out, int64_t out_stride) {
  const hn::ScalableTag<float> d;
  const int N = static_cast<int>(hn::Lanes(d));
  const int vec_end = dv / N * N;
  float kv_mem[kMaxDeltaRuleDim];
  float delta[kMaxDeltaRuleDim];
  const float* src = state_in;
  for (int t = 0; t < n; ++t) {
    const float* kt = k + t * qk_stride;
    const float* vt = v + t * v_stride;
    const float g = decay[t * gb_stride], b = beta[t * gb_stride];
    // Decay the state and read what it holds for k_t: kv_mem = S^T k_t.
    for (int j = 0; j < dv; ++j) kv_mem[j] = 0.0f;
    const auto vg = hn::Set(d, g);
    for (int i = 0; i < dk; ++i) {
      const float* s_in = src + static_cast<int64_t>(i) * dv;
      float* s = state + static_cast<int64_t>(i) * dv;
      const auto ki = hn::Set(d, kt[i]);
      int j = 0;
      for (; j < vec_end; j += N) {
        const auto row = hn::Mul(hn::LoadU(d, s_in + j), vg);
        hn::StoreU(row, d, s + j);
        hn::StoreU(hn::MulAdd(row, ki, hn::LoadU(d, kv_mem + j)), d, kv_mem + j);
      }
      for (; j < dv; ++j) {
        s[j] = s_in[j] * g;
        kv_mem[j] = std::fma(s[j], kt[i], kv_mem[j]);
      }
    }
    src = state;
    for (int j = 0; j < dv; ++j) delta[j] = (vt[j] - kv_mem[j]) * b;
    // Write k_t (x) delta into the state and read the output with q_t.
    const float* qt = q ? q + t * qk_stride : nullptr;
    float* ot = q ? out + t * out_stride : nullptr;
    if (ot) {
      for (int j = 0; j < dv; ++j) ot[j] = 0.0f;
    }
    for (int i = 0; i < dk; ++i) {
      float* s = state + static_cast<int64_t>(i) * dv;
      const auto ki = hn::Set(d, kt[i]);
      int j = 0;
      if (ot) {
        const auto qi = hn::Set(d, qt[i]);
        for (; j < vec_end; j += N) {
          const auto row = hn::MulAdd(ki, hn::LoadU(d, delta + j), hn::LoadU(d, s + j));
          hn::StoreU(row, d, s + j);
          hn::StoreU(hn::MulAdd(row, qi, hn::LoadU(d, ot + j)), d, ot + j);
        }
        for (; j < dv; ++j) {
          s[j] = std::fma(kt[i], delta[j], s[j]);
          ot[j] = std::fma(s[j], qt[i], ot[j]);
        }
      } else {
        for (; j < vec_end; j += N) {
          hn::StoreU(hn::MulAdd(ki, hn::LoadU(d, delta + j), hn::LoadU(d, s + j)), d, s + j);
        }
        for (; j < dv; ++j) s[j] = std::fma(kt[i], delta[j], s[j]);
      }
    }
  }
}

}  // namespace dflash::ops::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace dflash::ops {
HWY_EXPORT(GatedDeltaRuleImpl);

void GatedDeltaRule(const float* state_in, float* state, int dk, int dv, int n, const float* q, const float* k,
                    int64_t qk_stride, const float* v, int64_t v_stride, const float* decay, const float* beta,
                    int64_t gb_stride, float* out, int64_t out_stride) {
  HWY_DYNAMIC_DISPATCH(GatedDeltaRuleImpl)
  (state_in, state, dk, dv, n, q, k, qk_stride, v, v_stride, decay, beta, gb_stride, out, out_stride);
}
}  // namespace dflash::ops
#endif
