// f32 rounded to bf16 (to nearest even, as F32ToBF16 rounds a number) a vector at a time, per
// SIMD target: for the KV store (ops/kv_store.cc) and the bf16 dot path's queries and softmax
// weights (ops/attention.cc, ops/softmax-inl.h).
#if defined(DFLASH_OPS_BF16_ROUND_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef DFLASH_OPS_BF16_ROUND_INL_H_
#undef DFLASH_OPS_BF16_ROUND_INL_H_
#else
#define DFLASH_OPS_BF16_ROUND_INL_H_
#endif

#include <cstdint>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace dflash::ops::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Each lane's f32 bits rounded to bf16 (to nearest even, as F32ToBF16 rounds a number): the
// bf16 bits in the high half, zeros below, i.e. the rounded f32. NaNs are StoreKv's to keep.
template <class VU>
HWY_INLINE VU RoundedBf16Bits(VU u) {
  const hn::DFromV<VU> du;
  return hn::And(hn::Add(u, hn::Add(hn::Set(du, 0x7FFFu), hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1u)))),
                 hn::Set(du, 0xFFFF0000u));
}

// A vector of finite floats rounded to bf16: stored into bits as bf16, returned as f32.
template <class D>
HWY_INLINE hn::Vec<D> RoundToBf16(D d, hn::Vec<D> x, uint16_t* bits) {
  const hn::RebindToUnsigned<D> du;
  const hn::RebindToSigned<D> di;
  const auto rounded = RoundedBf16Bits(hn::BitCast(du, x));
  const hn::Rebind<uint16_t, D> d16;
  hn::StoreU(hn::DemoteTo(d16, hn::BitCast(di, hn::ShiftRight<16>(rounded))), d16, bits);
  return hn::BitCast(d, rounded);
}

}  // namespace dflash::ops::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard toggle
