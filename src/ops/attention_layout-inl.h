// KV cache layouts as attention reads them (ops.h: KvView), per SIMD target: elements widened
// to f32 exactly, key tiles transposed dim-major, bf16 pairs split or padded. Every path turns
// the same cached bits into the same f32, which is what keeps attention batch-invariant across
// row counts and layouts (ops/attention.cc).
#if defined(DFLASH_OPS_ATTENTION_LAYOUT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef DFLASH_OPS_ATTENTION_LAYOUT_INL_H_
#undef DFLASH_OPS_ATTENTION_LAYOUT_INL_H_
#else
#define DFLASH_OPS_ATTENTION_LAYOUT_INL_H_
#endif

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/dtype.h"
#include "hwy/highway.h"
#include "ops/ops.h"

HWY_BEFORE_NAMESPACE();
namespace dflash::ops::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;
constexpr int kLanes = static_cast<int>(hn::MaxLanes(DF()));
static_assert(kKvTile % kLanes == 0, "a key tile must hold whole vectors of keys");

// Calls fn with a null pointer of the element type a KV cache of `type` stores (checked by
// CheckKvType), so one template serves f32, f16 and bf16 caches.
template <class Fn>
HWY_INLINE void WithKvElement(DType type, const Fn& fn) {
  if (type == DType::kF32) {
    fn(static_cast<const float*>(nullptr));
  } else if (type == DType::kF16) {
    fn(static_cast<const hwy::float16_t*>(nullptr));
  } else {
    fn(static_cast<const hwy::bfloat16_t*>(nullptr));
  }
}

// kLanes elements (or one) of a cache row as f32: loaded (f32) or widened (f16, bf16), exactly.
HWY_INLINE VF LoadF32(const float* p) { return hn::LoadU(DF(), p); }
HWY_INLINE VF LoadF32(const hwy::float16_t* p) { return hn::PromoteTo(DF(), hn::LoadU(hn::Rebind<hwy::float16_t, DF>(), p)); }
HWY_INLINE VF LoadF32(const hwy::bfloat16_t* p) {
  return hn::PromoteTo(DF(), hn::LoadU(hn::Rebind<hwy::bfloat16_t, DF>(), p));
}
HWY_INLINE float ScalarF32(const float* p) { return *p; }
HWY_INLINE uint16_t Bits(const void* p) {
  uint16_t b;
  std::memcpy(&b, p, sizeof(b));
  return b;
}
HWY_INLINE float ScalarF32(const hwy::float16_t* p) { return F16ToF32(Bits(p)); }
HWY_INLINE float ScalarF32(const hwy::bfloat16_t* p) { return BF16ToF32(Bits(p)); }

// Widens `rows` positions of head_dim elements (src, `stride` elements apart) to f32 rows
// hd_pad floats apart, zero-padded to hd_pad: the same values LoadF32 gives in registers.
template <class T>
void WidenRows(const T* src, int64_t stride, int rows, int hd, int hd_pad, float* dst) {
  const DF d;
  for (int r = 0; r < rows; ++r) {
    const T* s = src + r * stride;
    float* o = dst + static_cast<int64_t>(r) * hd_pad;
    int i = 0;
    for (; i + kLanes <= hd; i += kLanes) hn::StoreU(LoadF32(s + i), d, o + i);
    for (; i < hd; ++i) o[i] = ScalarF32(s + i);
    for (; i < hd_pad; ++i) o[i] = 0.0f;
  }
}

// A dim-major f32 key tile (element i of key j at dst[i * kKvTile + j]) from `rows` keys
// stored as rows (src, `stride` elements apart); the keys past `rows` are zeros.
// Key by key, each read as vectors along its row: reading dim by dim instead touched all 32
// rows per dim, which in a position-major cache lie a multiple of 4 KiB apart, in one L1 set.
template <class T>
void TransposeKeys(const T* src, int64_t stride, int rows, int hd, float* dst) {
  const DF d;
  alignas(64) float row[kLanes];
  for (int j = 0; j < kKvTile; ++j) {
    const T* s = src + j * stride;
    int i = 0;
    if (j < rows) {
      for (; i + kLanes <= hd; i += kLanes) {
        hn::Store(LoadF32(s + i), d, row);
        for (int l = 0; l < kLanes; ++l) dst[static_cast<int64_t>(i + l) * kKvTile + j] = row[l];
      }
      for (; i < hd; ++i) dst[static_cast<int64_t>(i) * kKvTile + j] = ScalarF32(s + i);
    } else {
      for (; i < hd; ++i) dst[static_cast<int64_t>(i) * kKvTile + j] = 0.0f;
    }
  }
}

// A tiled cache's key tile (hd * kKvTile elements, dim-major already) widened to f32.
template <class T>
void WidenTile(const T* src, int hd, float* dst) {
  const DF d;
  for (int64_t i = 0; i < static_cast<int64_t>(hd) * kKvTile; i += kLanes) hn::StoreU(LoadF32(src + i), d, dst + i);
}

// A tiled bf16 cache's key tile (dims paired, ops.h) widened to the dim-major f32 tile: the
// low half of each 32-bit pair is dim 2i, the high half dim 2i + 1, both exact.
HWY_INLINE void WidenKeyPairs(const uint16_t* src, int hd, float* dst) {
  const DF d;
  const hn::RebindToUnsigned<DF> du;
  const auto high = hn::Set(du, 0xFFFF0000u);
  for (int i = 0; i < hd; i += 2) {
    for (int j = 0; j < kKvTile; j += kLanes) {
      const auto pairs = hn::LoadU(du, reinterpret_cast<const uint32_t*>(src + (i / 2 * kKvTile + j) * 2));
      hn::StoreU(hn::BitCast(d, hn::ShiftLeft<16>(pairs)), d, dst + i * kKvTile + j);
      hn::StoreU(hn::BitCast(d, hn::And(pairs, high)), d, dst + (i + 1) * kKvTile + j);
    }
  }
}

// `rows` positions of a tiled bf16 cache's values (positions paired, ops.h) from tile position 0
// widened to f32 rows hd_pad floats apart, zero-padded: what WidenRows gives for plain rows.
HWY_INLINE void WidenValuePairs(const uint16_t* src, int rows, int hd, int hd_pad, float* dst) {
  const DF d;
  const hn::RebindToUnsigned<DF> du;
  const auto high = hn::Set(du, 0xFFFF0000u);
  for (int r = 0; r < rows; r += 2) {
    const uint16_t* s = src + static_cast<int64_t>(r) * hd;  // positions r and r + 1
    float* even = dst + static_cast<int64_t>(r) * hd_pad;
    float* odd = even + hd_pad;  // the tile has room for it when rows is odd
    int i = 0;
    for (; i + kLanes <= hd; i += kLanes) {
      const auto pairs = hn::LoadU(du, reinterpret_cast<const uint32_t*>(s + 2 * i));
      hn::StoreU(hn::BitCast(d, hn::ShiftLeft<16>(pairs)), d, even + i);
      hn::StoreU(hn::BitCast(d, hn::And(pairs, high)), d, odd + i);
    }
    for (; i < hd; ++i) even[i] = BF16ToF32(s[2 * i]), odd[i] = BF16ToF32(s[2 * i + 1]);
    for (; i < hd_pad; ++i) even[i] = odd[i] = 0.0f;
  }
}

// For the bf16 dot path over a cache of rows: `rows` keys (src, `stride` elements apart) into a
// paired tile of hd_pad dims (ops.h's layout), and `rows` values into position pairs hd_pad
// dims wide; what lies past `rows` or hd is zero.
inline void PairKeys(const uint16_t* src, int64_t stride, int rows, int hd, int hd_pad, uint16_t* dst) {
  std::fill_n(dst, static_cast<int64_t>(hd_pad) * kKvTile, uint16_t{0});
  for (int j = 0; j < rows; ++j)
    for (int i = 0; i < hd; ++i) dst[(i / 2 * kKvTile + j) * 2 + i % 2] = src[j * stride + i];
}
inline void PairValues(const uint16_t* src, int64_t stride, int rows, int hd, int hd_pad, uint16_t* dst) {
  std::fill_n(dst, static_cast<int64_t>(hd_pad) * kKvTile, uint16_t{0});
  for (int j = 0; j < rows; ++j)
    for (int i = 0; i < hd; ++i) dst[(j / 2 * hd_pad + i) * 2 + j % 2] = src[j * stride + i];
}
// A tiled bf16 cache's value pairs (hd dims) for `rows` positions, each pair widened to hd_pad
// dims with zeros.
inline void PadValuePairs(const uint16_t* src, int rows, int hd, int hd_pad, uint16_t* dst) {
  std::fill_n(dst, static_cast<int64_t>(hd_pad) * kKvTile, uint16_t{0});
  for (int r = 0; r < rows; r += 2) std::memcpy(dst + r * hd_pad, src + r * hd, 4 * static_cast<size_t>(hd));
}

// Where the f32 path reads keys and values: a cache's elements (T*: a dim-major key tile, value
// rows v_stride apart), or a tiled bf16 cache's pairs in place (Bf16Pairs: pairs of a key tile,
// value pairs v_stride bf16 apart), widened in registers to the same f32 either way.
struct Bf16Pairs {
  const uint16_t* p;
};
template <class T>
HWY_INLINE VF KeyDims(const T* kt, int i, int key) {
  return LoadF32(kt + static_cast<int64_t>(i) * kKvTile + key);
}
template <class T>
HWY_INLINE VF ValueDims(const T* v, int64_t v_stride, int j, int i) {
  return LoadF32(v + j * v_stride + i);
}
// The low half of a pair (dim or position 2n) or its high half (2n + 1), as f32.
HWY_INLINE VF PairHalf(const uint16_t* p, int high) {
  const hn::RebindToUnsigned<DF> du;
  const auto pairs = hn::LoadU(du, reinterpret_cast<const uint32_t*>(p));
  return hn::BitCast(DF(), high ? hn::And(pairs, hn::Set(du, 0xFFFF0000u)) : hn::ShiftLeft<16>(pairs));
}
HWY_INLINE VF KeyDims(Bf16Pairs kt, int i, int key) { return PairHalf(kt.p + (i / 2 * kKvTile + key) * 2, i % 2); }
HWY_INLINE VF ValueDims(Bf16Pairs v, int64_t v_stride, int j, int i) {
  return PairHalf(v.p + j / 2 * v_stride + 2 * i, j % 2);
}

}  // namespace dflash::ops::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard toggle
