// Attention's bf16 dot-product kernels on one key tile (AVX512_BF16; see ops/attention.cc):
// compiled for the AVX3_DL target only, where they define DFLASH_BF16_DOT, and called only
// where the CPU has the instructions.
#if defined(DFLASH_OPS_ATTENTION_BF16_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef DFLASH_OPS_ATTENTION_BF16_INL_H_
#undef DFLASH_OPS_ATTENTION_BF16_INL_H_
#else
#define DFLASH_OPS_ATTENTION_BF16_INL_H_
#endif

#include <cstdint>

#include "hwy/highway.h"
#include "ops/ops.h"

#undef DFLASH_BF16_DOT  // defined again below for the one target that has the path
#undef DFLASH_BF16_ATTR
HWY_BEFORE_NAMESPACE();
namespace dflash::ops::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_TARGET == HWY_AVX3_DL
// ------------------------------------------------------------------------------------------
// The bf16 dot path. Highway 1.0 has no bf16 dot product, so these are intrinsics, compiled
// for AVX512_BF16 on their own (AVX3_DL does not imply it: Ice Lake lacks it) and called only
// where the CPU has it. Operands as ops.h pairs them: q[h] and p[h] hold bf16 pairs as 32-bit
// words, broadcast to every lane.
#define DFLASH_BF16_DOT 1
#define DFLASH_BF16_ATTR __attribute__((target("avx512f,avx512bw,avx512bf16")))
constexpr int kBf16Lanes = 16;  // f32 sums per vector; each multiplies 32 bf16
constexpr int kBf16KeyVectors = kKvTile / kBf16Lanes;

DFLASH_BF16_ATTR inline __m512 DotPairs(__m512 acc, __m512i a, uint32_t pair) {
  return _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh>(a), reinterpret_cast<__m512bh>(_mm512_set1_epi32(pair)));
}

// s[h][j] = dot(q[h], key j) for the kKvTile keys of a paired tile, over dim_pairs pairs: two
// chains (even and odd pairs), then added, for every H.
template <int H>
DFLASH_BF16_ATTR void TileScoresBf16(const uint32_t* const (&q)[H], const uint16_t* kt, int dim_pairs,
                                     float* const (&s)[H]) {
  __m512 acc[H][kBf16KeyVectors][2];
  for (int h = 0; h < H; ++h)
    for (int v = 0; v < kBf16KeyVectors; ++v) acc[h][v][0] = acc[h][v][1] = _mm512_setzero_ps();
  int i = 0;
  for (; i + 2 <= dim_pairs; i += 2) {
#pragma GCC unroll 2
    for (int c = 0; c < 2; ++c) {
      __m512i k[kBf16KeyVectors];
      for (int v = 0; v < kBf16KeyVectors; ++v) k[v] = _mm512_loadu_si512(kt + ((i + c) * kKvTile + v * kBf16Lanes) * 2);
#pragma GCC unroll 4
      for (int h = 0; h < H; ++h)
        for (int v = 0; v < kBf16KeyVectors; ++v) acc[h][v][c] = DotPairs(acc[h][v][c], k[v], q[h][i + c]);
    }
  }
  if (i < dim_pairs) {
    for (int v = 0; v < kBf16KeyVectors; ++v) {
      const __m512i k = _mm512_loadu_si512(kt + (i * kKvTile + v * kBf16Lanes) * 2);
      for (int h = 0; h < H; ++h) acc[h][v][0] = DotPairs(acc[h][v][0], k, q[h][i]);
    }
  }
  for (int h = 0; h < H; ++h)
    for (int v = 0; v < kBf16KeyVectors; ++v)
      _mm512_storeu_ps(s[h] + v * kBf16Lanes, _mm512_add_ps(acc[h][v][0], acc[h][v][1]));
}

// AccumulateTile's job on position pairs: acc[h] = acc[h] * rescale[h], then for the pairs
// covering keys [jb, je), acc[h] += p[h] pair . values pair, over dim floats (a multiple of 16;
// pairs pair_stride bf16 apart), in slices of W vectors per head held in registers. A pair
// half-outside [jb, je) loads that position's values as zero: its weight is 0 already, and
// what lies there may not be a number.
template <int W, int H>
DFLASH_BF16_ATTR int AccumulateSlicesBf16(float* const (&acc)[H], const float (&rescale)[H],
                                          const uint32_t* const (&p)[H], const uint16_t* v, int64_t pair_stride,
                                          int jb, int je, int i, int dim) {
  for (; i + W * kBf16Lanes <= dim; i += W * kBf16Lanes) {
    __m512 a[H][W];
    for (int h = 0; h < H; ++h) {
      const __m512 vs = _mm512_set1_ps(rescale[h]);
      for (int w = 0; w < W; ++w) a[h][w] = _mm512_mul_ps(_mm512_loadu_ps(acc[h] + i + w * kBf16Lanes), vs);
    }
    const int j2b = jb / 2, j2e = (je + 1) / 2;
    for (int j2 = j2b; j2 < j2e; ++j2) {
      const uint16_t* vj = v + j2 * pair_stride + 2 * i;
      const bool edge = 2 * j2 < jb || 2 * j2 + 1 >= je;
      __mmask32 keep = ~__mmask32{0};
      if (2 * j2 < jb) keep &= 0xAAAAAAAAu;      // only position 2 j2 + 1 is in range
      if (2 * j2 + 1 >= je) keep &= 0x55555555u;  // only position 2 j2
#pragma GCC unroll 8
      for (int w = 0; w < W; ++w) {
        __m512i vv = edge ? _mm512_maskz_loadu_epi16(keep, vj + 2 * w * kBf16Lanes)
                          : _mm512_loadu_si512(vj + 2 * w * kBf16Lanes);
        asm("" : "+v"(vv));  // one load for the H heads (see InRegister)
#pragma GCC unroll 2
        for (int h = 0; h < H; ++h) a[h][w] = DotPairs(a[h][w], vv, p[h][j2]);
      }
    }
    for (int h = 0; h < H; ++h)
      for (int w = 0; w < W; ++w) _mm512_storeu_ps(acc[h] + i + w * kBf16Lanes, a[h][w]);
  }
  return i;
}

template <int H>
DFLASH_BF16_ATTR void AccumulateTileBf16(float* const (&acc)[H], const float (&rescale)[H],
                                         const uint32_t* const (&p)[H], const uint16_t* v, int64_t pair_stride,
                                         int jb, int je, int dim) {
  int i = AccumulateSlicesBf16<16 / H, H>(acc, rescale, p, v, pair_stride, jb, je, 0, dim);  // as AccumulateTile
  i = AccumulateSlicesBf16<4 / H, H>(acc, rescale, p, v, pair_stride, jb, je, i, dim);
  AccumulateSlicesBf16<1, H>(acc, rescale, p, v, pair_stride, jb, je, i, dim);
}
#endif  // HWY_TARGET == HWY_AVX3_DL

}  // namespace dflash::ops::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard toggle
