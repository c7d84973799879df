// Row-wise and element-wise kernels: RMSNorm, SiLU-gated product, residual add.
// Each row's reduction (RMSNorm's sum of squares) is one vector accumulator in a fixed order,
// so rows are batch-invariant like MatMul's.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/elementwise.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"

#ifndef DFLASH_OPS_ELEMENTWISE_ONCE
#define DFLASH_OPS_ELEMENTWISE_ONCE
#include <cmath>

#include "ops/ops.h"
#endif

HWY_BEFORE_NAMESPACE();
namespace dflash::ops::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void RmsNormImpl(const float* x, int64_t rows, int64_t dim, const float* weight, float eps,
                 float* y) {
  const hn::ScalableTag<float> d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    auto acc = hn::Zero(d);
    int64_t i = 0;
    for (; i + N <= dim; i += N) {
      const auto v = hn::LoadU(d, xr + i);
      acc = hn::MulAdd(v, v, acc);
    }
    float ss = hn::GetLane(hn::SumOfLanes(d, acc));
    for (int64_t t = i; t < dim; ++t) ss += xr[t] * xr[t];
    const float inv = 1.0f / std::sqrt(ss / static_cast<float>(dim) + eps);
    const auto vinv = hn::Set(d, inv);
    i = 0;
    for (; i + N <= dim; i += N) {
      const auto v = hn::Mul(hn::LoadU(d, xr + i), vinv);
      hn::StoreU(hn::Mul(v, hn::LoadU(d, weight + i)), d, yr + i);
    }
    for (int64_t t = i; t < dim; ++t) yr[t] = xr[t] * inv * weight[t];
  }
}

// silu(g) * u = g * u / (1 + exp(-g)).
void SiluMulImpl(const float* gate, const float* up, int64_t n, float* out) {
  const hn::ScalableTag<float> d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const auto one = hn::Set(d, 1.0f);
  int64_t i = 0;
  for (; i + N <= n; i += N) {
    const auto g = hn::LoadU(d, gate + i);
    const auto denom = hn::Add(one, hn::Exp(d, hn::Neg(g)));
    hn::StoreU(hn::Div(hn::Mul(g, hn::LoadU(d, up + i)), denom), d, out + i);
  }
  for (; i < n; ++i) out[i] = gate[i] * up[i] / (1.0f + std::exp(-gate[i]));
}

void AddInPlaceImpl(float* y, const float* x, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(hn::Add(hn::LoadU(d, y + i), hn::LoadU(d, x + i)), d, y + i);
  for (; i < n; ++i) y[i] += x[i];
}

const char* TargetNameImpl() { return hwy::TargetName(HWY_TARGET); }

}  // namespace dflash::ops::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace dflash::ops {
HWY_EXPORT(RmsNormImpl);
HWY_EXPORT(SiluMulImpl);
HWY_EXPORT(AddInPlaceImpl);
HWY_EXPORT(TargetNameImpl);

void RmsNorm(const float* x, int64_t rows, int64_t dim, const float* weight, float eps, float* y) {
  HWY_DYNAMIC_DISPATCH(RmsNormImpl)(x, rows, dim, weight, eps, y);
}
void SiluMul(const float* gate, const float* up, int64_t n, float* out) {
  HWY_DYNAMIC_DISPATCH(SiluMulImpl)(gate, up, n, out);
}
void AddInPlace(float* y, const float* x, int64_t n) {
  HWY_DYNAMIC_DISPATCH(AddInPlaceImpl)(y, x, n);
}
const char* SimdTargetName() { return HWY_DYNAMIC_DISPATCH(TargetNameImpl)(); }
}  // namespace dflash::ops
#endif
