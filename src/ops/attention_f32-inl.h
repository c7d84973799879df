// Attention's f32 kernels on one key tile, per SIMD target: scores of up to four (row, head)
// pairs against a dim-major key tile, and the weighted sum of the tile's values into their
// accumulators. Keys and values come in any layout attention_layout-inl.h reads (KeyDims,
// ValueDims), widened to the same f32 in registers.
#if defined(DFLASH_OPS_ATTENTION_F32_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef DFLASH_OPS_ATTENTION_F32_INL_H_
#undef DFLASH_OPS_ATTENTION_F32_INL_H_
#else
#define DFLASH_OPS_ATTENTION_F32_INL_H_
#endif

#include <cstdint>

#include "hwy/highway.h"
#include "ops/attention_layout-inl.h"

HWY_BEFORE_NAMESPACE();
namespace dflash::ops::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Partial sums per key vector over head_dim: fixed per target (never by how many heads or rows
// are computed together), enough independent FMA chains to hide the FMA latency.
constexpr int kChains = kLanes >= 16 ? 2 : 1;
constexpr int kKeyVectors = kKvTile / kLanes;

// s[h][j] = dot(q[h], key j) over dim floats for the kKvTile keys of a dim-major tile kt, for
// H (row, head) pairs that read the same keys: each widened key vector serves all H. Key j's
// dot product is chain c's sum over the dims i = c (mod kChains) in ascending order, the chains
// then added in order: one order for every H, row block and cache layout.
template <int H, class K>
HWY_INLINE void TileScores(const float* const (&q)[H], K kt, int dim, float* const (&s)[H]) {
  static_assert(H == 1 || H == 2 || H == 4, "pairs are scored one, two or four at a time");
  const DF d;
  VF acc[H][kKeyVectors][kChains];
  for (int h = 0; h < H; ++h)
    for (int v = 0; v < kKeyVectors; ++v)
      for (int c = 0; c < kChains; ++c) acc[h][v][c] = hn::Zero(d);
  const auto step = [&](int i, int c) HWY_ATTR {
    VF kv[kKeyVectors];
#pragma GCC unroll 32
    for (int v = 0; v < kKeyVectors; ++v) kv[v] = KeyDims(kt, i, v * kLanes);
#pragma GCC unroll 4
    for (int h = 0; h < H; ++h) {
      const VF qv = hn::Set(d, q[h][i]);
#pragma GCC unroll 32
      for (int v = 0; v < kKeyVectors; ++v) acc[h][v][c] = hn::MulAdd(qv, kv[v], acc[h][v][c]);
    }
  };
  int i = 0;
  for (; i + kChains <= dim; i += kChains) {
#pragma GCC unroll 2
    for (int c = 0; c < kChains; ++c) step(i + c, c);
  }
  for (int c = 0; i < dim; ++i, ++c) step(i, c);
  for (int h = 0; h < H; ++h) {
    for (int v = 0; v < kKeyVectors; ++v) {
      VF sum = acc[h][v][0];
      for (int c = 1; c < kChains; ++c) sum = hn::Add(sum, acc[h][v][c]);
      hn::StoreU(sum, d, s[h] + v * kLanes);
    }
  }
}

// Makes the compiler materialise v in a register. Left to itself GCC folds a vector's load into
// every FMA that reads it (one load per FMA, which the load ports cannot feed at two FMAs a
// cycle); loaded once for the H heads, 16 rows over 512 f16 keys, 1 thread, EPYC (Zen 5): 610
// -> 475-482 us, over 4096 keys 5.3 -> 4.7-4.8 ms.
template <class V>
HWY_INLINE void InRegister(V& v) {
#if HWY_ARCH_X86 && HWY_TARGET != HWY_EMU128 && HWY_TARGET != HWY_SCALAR
  asm("" : "+v"(v.raw));
#else
  (void)v;
#endif
}

// Slices of W vectors of H heads' accumulators from float i while they fit in dim: each slice
// stays in registers for the whole tile (one load and one store per tile, not per key), and
// each widened value vector serves all H heads. W * H independent FMA chains per key hide the
// FMA latency; returns where the slices stopped.
template <int W, int H, class V>
HWY_INLINE int AccumulateSlices(float* const (&acc)[H], const float (&rescale)[H], const float* const (&p)[H],
                                V v, int64_t v_stride, int jb, int je, int i, int dim) {
  const DF d;
  for (; i + W * kLanes <= dim; i += W * kLanes) {
    VF a[H][W];
#pragma GCC unroll 2
    for (int h = 0; h < H; ++h) {
      const VF vs = hn::Set(d, rescale[h]);
#pragma GCC unroll 8
      for (int w = 0; w < W; ++w) a[h][w] = hn::Mul(hn::LoadU(d, acc[h] + i + w * kLanes), vs);
    }
    for (int j = jb; j < je; ++j) {
#pragma GCC unroll 8
      for (int w = 0; w < W; ++w) {
        VF vv = ValueDims(v, v_stride, j, i + w * kLanes);
        InRegister(vv);
#pragma GCC unroll 2
        for (int h = 0; h < H; ++h) a[h][w] = hn::MulAdd(hn::Set(d, p[h][j]), vv, a[h][w]);
      }
    }
#pragma GCC unroll 2
    for (int h = 0; h < H; ++h) {
#pragma GCC unroll 8
      for (int w = 0; w < W; ++w) hn::StoreU(a[h][w], d, acc[h] + i + w * kLanes);
    }
  }
  return i;
}

// acc[h] = acc[h] * rescale[h], then acc[h] += p[h][j] * v[j] for tile keys j in [jb, je) in
// order, over dim floats (a multiple of kLanes; v rows v_stride floats apart), for H heads.
// Every element sees the same operations in the same order whatever slice width covers it.
template <int H, class V>
HWY_INLINE void AccumulateTile(float* const (&acc)[H], const float (&rescale)[H], const float* const (&p)[H],
                               V v, int64_t v_stride, int jb, int je, int dim) {
  // The whole of a 128-dim head in one slice: 16 accumulator chains per key, twice what the FMA
  // latency needs at two FMAs a cycle. 8 / H before: 1 thread, f16 keys, interleaved, EPYC
  // (Zen 5): one row over 512 keys 35.8-37.8 -> 33.7-34.9 us, 16 rows 605-620 -> 587-604 us.
  constexpr int kWide = 16 / H, kNarrow = 4 / H;
  int i = AccumulateSlices<kWide, H>(acc, rescale, p, v, v_stride, jb, je, 0, dim);
  i = AccumulateSlices<kNarrow, H>(acc, rescale, p, v, v_stride, jb, je, i, dim);
  AccumulateSlices<1, H>(acc, rescale, p, v, v_stride, jb, je, i, dim);
}

}  // namespace dflash::ops::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard toggle
