// Attention's online softmax, per SIMD target: one key tile's step for the (row, head) pairs
// scored together (scale, mask, running max and sums, the weights and the accumulators'
// rescale), with a short exp for the non-positive arguments it needs.
#if defined(DFLASH_OPS_SOFTMAX_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef DFLASH_OPS_SOFTMAX_INL_H_
#undef DFLASH_OPS_SOFTMAX_INL_H_
#else
#define DFLASH_OPS_SOFTMAX_INL_H_
#endif

#include <algorithm>
#include <cstdint>
#include <limits>

#include "hwy/highway.h"
#include "ops/attention_layout-inl.h"
#include "ops/bf16_round-inl.h"

HWY_BEFORE_NAMESPACE();
namespace dflash::ops::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// exp(x) for x <= 0, -inf giving exactly 0, as the softmax needs it: 2^n * 2^f with n = round(x
// log2 e) (clamped at -127, whose 2^n is +0) and a degree-6 Taylor polynomial for 2^f on [-1/2,
// 1/2]. Relative error against exp in double, float32 emulated in numpy: 2.4e-7 on [-1, 0],
// 3.4e-7 on [-10, 0], 1.5e-6 down to -88 (log2 e's rounding times |x|). hn::Exp also covers x >
// 0 and special values in about twice the instructions; the softmax runs two exps per (row,
// head) pair and key tile.
template <class V>
HWY_INLINE V ExpNonPositive(V x) {
  const hn::DFromV<V> d;
  const hn::RebindToSigned<decltype(d)> di;
  const auto log2e = hn::Set(d, 1.44269504089f);
  x = hn::Max(x, hn::Set(d, -88.0f));
  const auto n = hn::Round(hn::Mul(x, log2e));
  const auto f = hn::MulAdd(x, log2e, hn::Neg(n));
  auto p = hn::Set(d, 1.5403530e-4f);
  for (const float c : {1.3333558e-3f, 9.6181291e-3f, 5.5504109e-2f, 2.4022651e-1f, 6.9314718e-1f, 1.0f})
    p = hn::MulAdd(p, f, hn::Set(d, c));
  const auto two_n = hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(hn::ConvertTo(di, n), hn::Set(di, 127))));
  return hn::Mul(p, two_n);
}

// s[j] = s[j] * scale for tile keys j in [jb, je), -inf for the others; returns the lane-wise max.
HWY_INLINE VF ScaleAndMask(float* s, float scale, int jb, int je) {
  const DF d;
  const hn::RebindToSigned<DF> di;
  const auto vneg = hn::Set(d, -std::numeric_limits<float>::infinity()), vscale = hn::Set(d, scale);
  // Most tiles lie inside every pair's key range: nothing to mask. 16 rows over 4096 bf16 keys,
  // 1 thread, Zen 5 EPYC, 3 interleaved runs: 2.63-2.72 -> 2.39-2.49 ms.
  const bool whole = jb == 0 && je == kKvTile;
  auto vmax = vneg;
  for (int j = 0; j < kKvTile; j += kLanes) {
    auto v = hn::Mul(hn::LoadU(d, s + j), vscale);
    if (!whole) {
      const auto idx = hn::Iota(di, j);
      const auto in = hn::And(hn::Not(hn::Lt(idx, hn::Set(di, jb))), hn::Lt(idx, hn::Set(di, je)));
      v = hn::IfThenElse(hn::RebindMask(d, in), v, vneg);
    }
    hn::StoreU(v, d, s + j);
    vmax = hn::Max(vmax, v);
  }
  return vmax;
}

// x[i] = exp(x[i]) (all <= 0) for the (up to four) pairs scored together, lane by lane, so that
// a pair's rescale does not depend on which pairs share the call. One vector exp instead of a
// libm call per pair: 16 rows over 512 f16 keys, 1 thread, EPYC (Zen 5), interleaved: 466-479 ->
// 437-446 us.
HWY_INLINE void PairRescales(float* x) {
  const hn::CappedTag<float, 4> d4;
  for (size_t i = 0; i < 4; i += hn::Lanes(d4)) hn::Store(ExpNonPositive(hn::Load(d4, x + i)), d4, x + i);
}

// A (row, head) pair's online-softmax state. The sum of its weights is kept lane by lane (lane l
// adds the weights of keys l, l + kLanes, ... of every tile) and reduced once, at the end: a
// horizontal sum per tile was a fifth of the softmax step.
struct RowState {
  float max;
  alignas(64) float sum[kLanes];

  float Sum() const { return hn::GetLane(hn::SumOfLanes(DF(), hn::Load(DF(), sum))); }
};

// A (row, head) pair of a task with keys [jb, je) in the current tile.
struct ActivePair {
  int pair, jb, je;
};
// Four pairs' accumulators and key vectors fill the 32 AVX-512 registers; half as many for 16.
constexpr int kScorePairs = kLanes >= 16 ? 4 : 2;

// The online-softmax step of `count` pairs scored together on one tile: scales and masks their
// scores, leaves exp(score - new max) in s[i] (rounded to bf16, also into p16[i], when p16 is
// given) and exp(old max - new max) in rescale[i], and updates each pair's max and sum. Out of
// line: inlined into the tile loop, it made GCC compile the f32 path's kernels worse (16 rows
// over 4096 f16 keys, 1 thread: 3.88-3.95 ms out of line, 4.54-4.92 inlined).
HWY_NOINLINE void SoftmaxStep(float (*s)[kKvTile], int count, const ActivePair* pass, RowState* state, float scale,
                            float (&rescale)[4], uint16_t (*p16)[kKvTile]) {
  const DF d;
  float new_max[kScorePairs];
  bool any_raised = false;
  for (int i = 0; i < count; ++i) {
    const float old_max = state[pass[i].pair].max;
    const VF tile_max = ScaleAndMask(s[i], scale, pass[i].jb, pass[i].je);
    // Most tiles raise no pair's max; only those that do need the horizontal max, and the exp
    // of the rescale (exp(0) is exactly 1).
    const bool raised = !hn::AllFalse(d, hn::Gt(tile_max, hn::Set(d, old_max)));
    new_max[i] = raised ? std::max(old_max, hn::GetLane(hn::MaxOfLanes(d, tile_max))) : old_max;
    rescale[i] = old_max - new_max[i];
    any_raised |= raised;
  }
  if (any_raised) {
    PairRescales(rescale);  // exp(old max - new max): 0 on the first tile
  } else {
    for (int i = 0; i < count; ++i) rescale[i] = 1.0f;
  }
  for (int i = 0; i < count; ++i) {
    RowState& st = state[pass[i].pair];
    const VF vmax = hn::Set(d, new_max[i]);
    VF sum = hn::Mul(hn::Load(d, st.sum), hn::Set(d, rescale[i]));
    for (int j = 0; j < kKvTile; j += kLanes) {
      VF w = ExpNonPositive(hn::Sub(hn::LoadU(d, s[i] + j), vmax));  // masked keys: exactly 0
      if (p16) w = RoundToBf16(d, w, p16[i] + j);  // the sum adds what the values are multiplied by
      hn::StoreU(w, d, s[i] + j);
      sum = hn::Add(sum, w);
    }
    hn::Store(sum, d, st.sum);
    st.max = new_max[i];
  }
}

}  // namespace dflash::ops::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard toggle
