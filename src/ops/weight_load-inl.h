// Per-target helpers: load one vector of weights as f32, whatever their storage type.
// Included by kernels compiled once per SIMD target (Highway's foreach_target pattern).
#if defined(DFLASH_OPS_WEIGHT_LOAD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef DFLASH_OPS_WEIGHT_LOAD_INL_H_
#undef DFLASH_OPS_WEIGHT_LOAD_INL_H_
#else
#define DFLASH_OPS_WEIGHT_LOAD_INL_H_
#endif

#include <cstdint>

#include "core/dtype.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace dflash::ops::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Storage tags; each knows its element type and how to widen Lanes(d) elements to f32.
struct F32Weights {
  using T = float;
  template <class D>
  static HWY_INLINE hn::Vec<D> Load(D d, const T* p) {
    return hn::LoadU(d, p);
  }
  static float Scalar(const T* p) { return *p; }
};

struct BF16Weights {
  using T = uint16_t;
  // bf16 is the top half of an f32: widen to u32 and shift, exact on every target.
  template <class D>
  static HWY_INLINE hn::Vec<D> Load(D d, const T* p) {
    const hn::RebindToUnsigned<D> du32;
    const hn::Rebind<uint16_t, D> du16;
    return hn::BitCast(d, hn::ShiftLeft<16>(hn::PromoteTo(du32, hn::LoadU(du16, p))));
  }
  static float Scalar(const T* p) {
    uint32_t u = static_cast<uint32_t>(*p) << 16;
    float f;
    __builtin_memcpy(&f, &u, 4);
    return f;
  }
};

struct F16Weights {
  using T = uint16_t;
  template <class D>
  static HWY_INLINE hn::Vec<D> Load(D d, const T* p) {
    const hn::Rebind<hwy::float16_t, D> df16;
    return hn::PromoteTo(d, hn::LoadU(df16, reinterpret_cast<const hwy::float16_t*>(p)));
  }
  static float Scalar(const T* p) { return F16ToF32(*p); }
};

}  // namespace dflash::ops::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard toggle
