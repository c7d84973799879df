// How a KV cache stores a new position: f32 rows rounded once to the cache's element type
// (StoreKv), or placed into a target's tiled layout (StoreKeyTiled, StoreValueTiled; ops.h).
// Each element is rounded on its own, so a position's cached bits never depend on which
// positions were stored with it.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/kv_store.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"
#include "ops/bf16_round-inl.h"

#ifndef DFLASH_OPS_KV_STORE_ONCE
#define DFLASH_OPS_KV_STORE_ONCE
#include <cstring>

#include "core/error.h"
#include "ops/ops.h"
#endif

HWY_BEFORE_NAMESPACE();
namespace dflash::ops::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void StoreKvImpl(const float* x, int64_t n, DType type, void* out) {
  using DF = hn::ScalableTag<float>;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(DF()));
  if (type == DType::kF32) {
    std::memcpy(out, x, n * sizeof(float));
  } else if (type == DType::kF16) {
    const DF d;
    const hn::Rebind<hwy::float16_t, DF> dh;
    auto* o = static_cast<hwy::float16_t*>(out);
    int64_t i = 0;
    for (; i + lanes <= n; i += lanes) hn::StoreU(hn::DemoteTo(dh, hn::LoadU(d, x + i)), dh, o + i);
    auto* bits = static_cast<uint16_t*>(out);
    for (; i < n; ++i) bits[i] = F32ToF16(x[i]);
  } else {
    // F32ToBF16 on a vector at a time: round to nearest even, NaNs kept quiet NaNs.
    const DF d;
    const hn::RebindToUnsigned<DF> du;
    const hn::RebindToSigned<DF> di;
    const hn::Rebind<uint16_t, DF> d16;
    const auto abs_mask = hn::Set(du, 0x7FFFFFFFu), quiet = hn::Set(du, 0x40u);
    const auto inf = hn::Set(di, 0x7F800000);
    auto* bits = static_cast<uint16_t*>(out);
    int64_t i = 0;
    for (; i + lanes <= n; i += lanes) {
      const auto u = hn::BitCast(du, hn::LoadU(d, x + i));
      const auto high = hn::ShiftRight<16>(u);
      const auto rounded = hn::ShiftRight<16>(RoundedBf16Bits(u));
      const auto nan = hn::RebindMask(du, hn::Gt(hn::BitCast(di, hn::And(u, abs_mask)), inf));
      hn::StoreU(hn::DemoteTo(d16, hn::BitCast(di, hn::IfThenElse(nan, hn::Or(high, quiet), rounded))), d16, bits + i);
    }
    for (; i < n; ++i) bits[i] = F32ToBF16(x[i]);
  }
}

}  // namespace dflash::ops::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace dflash::ops {
HWY_EXPORT(StoreKvImpl);

void CheckKvType(DType type, const char* what) {
  if (type != DType::kF32 && type != DType::kF16 && type != DType::kBF16)
    Fail(what, ": KV element type ", DTypeName(type), " is not f32, f16 or bf16");
}

void StoreKv(const float* x, int64_t n, DType type, void* out) {
  CheckKvType(type, "StoreKv");
  HWY_DYNAMIC_DISPATCH(StoreKvImpl)(x, n, type, out);
}

namespace {
// One position's head_dim values rounded as StoreKv rounds them, each placed at offset(i).
template <class Offset>
void StoreTiled(const float* x, int head_dim, DType type, void* head, const char* what, const Offset& offset) {
  CheckKvType(type, what);
  if (head_dim > 512) Fail(what, ": head_dim ", head_dim, " is over 512");
  if (type == DType::kBF16 && head_dim % 2 != 0) Fail(what, ": a tiled bf16 cache pairs dims, head_dim ", head_dim, " is odd");
  // Typed element copies: a memcpy of a run-time size per element made storing a 16-row
  // verify's keys and values a millisecond of the pass.
  if (type == DType::kF32) {
    for (int i = 0; i < head_dim; ++i) static_cast<float*>(head)[offset(i)] = x[i];
    return;
  }
  alignas(64) uint16_t rounded[512];
  StoreKv(x, head_dim, type, rounded);
  for (int i = 0; i < head_dim; ++i) static_cast<uint16_t*>(head)[offset(i)] = rounded[i];
}
}  // namespace

void StoreKeyTiled(const float* x, int head_dim, DType type, int64_t p, void* head) {
  StoreTiled(x, head_dim, type, head, "StoreKeyTiled", [&](int i) { return TiledKeyOffset(p, i, head_dim, type); });
}

void StoreValueTiled(const float* x, int head_dim, DType type, int64_t p, void* head) {
  StoreTiled(x, head_dim, type, head, "StoreValueTiled", [&](int i) { return TiledValueOffset(p, i, head_dim, type); });
}

}  // namespace dflash::ops
#endif
