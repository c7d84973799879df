// Quantised MatMul's AVX3_DL path: 16 output columns per vector. A format produces, per block
// of a 16-column group, code vectors whose lane c holds 4 consecutive codes of column c, and
// the per-column scales; Step() then runs them against up to 16 activation rows with vpdpbusd.
#if defined(DFLASH_OPS_MATMUL_QUANT_VNNI_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef DFLASH_OPS_MATMUL_QUANT_VNNI_INL_H_
#undef DFLASH_OPS_MATMUL_QUANT_VNNI_INL_H_
#else
#define DFLASH_OPS_MATMUL_QUANT_VNNI_INL_H_
#endif

#include <algorithm>
#include <cstdint>

#include "core/tensor.h"
#include "hwy/highway.h"
#include "ops/matmul_quant_cpu.h"
#include "ops/matmul_quant_packed-inl.h"
#include "ops/quant_activations.h"

HWY_BEFORE_NAMESPACE();
#if HWY_TARGET == HWY_AVX3_DL
DFLASH_VNNI_AMX_TARGET_BEGIN
namespace dflash::ops::HWY_NAMESPACE {
using namespace quant;
namespace hn = hwy::HWY_NAMESPACE;

// acc += codes · (the 4 activation codes at x, in every lane), the broadcast folded into
// vpdpbusd's memory operand: GCC 12 emits a separate vpbroadcastd for each, as many as the dot
// products. 1 thread, interleaved, best of 15: Q8_0 16 rows 1024x1024 126 -> 118 us,
// 3072x1024 353 -> 337 us; the 16-row Q8_0 pass at 512 context 65.1-66.1 -> 63.1-63.5 ms.
HWY_INLINE void DotBroadcast(__m512i& acc, __m512i codes, const int8_t* x) {
  asm("vpdpbusd %[x]%{1to16%}, %[w], %[acc]"
      : [acc] "+v"(acc)
      : [w] "v"(codes), [x] "m"(*reinterpret_cast<const int8_t(*)[4]>(x)));
}

// acc[r] += block of Q code vectors (8: a 32-element block, 4: a 16-element group) at k0
// against the codes of row r of run x, scaled; kInit applies the codes' offset.
template <int R, int Q, bool kInit, bool kMin>
HWY_INLINE void Step(const __m512i* codes, __m512 wscale, __m512 wmin, const QuantizedRun& x, int64_t k0,
                     __m512 (&acc)[R]) {
  const int8_t* xc0 = x.Codes(k0);
  const int32_t* init = CodeInit<Q>(x, k0);
  const float* dx = x.BlockScale(k0);
  const float* bsum = x.BlockSum(k0);
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    const int8_t* xc = xc0 + 32 * r;
    // With few rows a single vpdpbusd chain would wait on its own latency; integer sums are
    // exact, so splitting the chain changes no bit.
    constexpr int kChains = R == 1 ? 4 : R == 2 ? 2 : 1;
    __m512i part[kChains];
    part[0] = _mm512_set1_epi32(kInit ? init[r] : 0);
    for (int c = 1; c < kChains; ++c) part[c] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int q = 0; q < Q; ++q) DotBroadcast(part[q % kChains], codes[q], xc + 4 * q);
    __m512i isum = part[0];
    for (int c = 1; c < kChains; ++c) isum = _mm512_add_epi32(isum, part[c]);
    ScaleBlock<kMin>(isum, wscale, wmin, dx[r], bsum[r], acc[r]);
  }
}

// Formats: kElems per block, kVectors per packed block, Block() adds one block to R rows.
struct Q8_0Format {
  static constexpr int64_t kElems = 32, kVectors = 8;
  template <int R>
  static HWY_INLINE void Block(const PackedColumns& g, int64_t b, const QuantizedRun& x, __m512 (&acc)[R],
                              bool ahead) {
    __m512i codes[8];
    for (int i = 0; i < 8; ++i) codes[i] = g.Vector(b, i);
    Step<R, 8, true, false>(codes, g.F16(b), _mm512_setzero_ps(), x, 32 * b, acc);
  }
};

struct Q4_0Format {
  static constexpr int64_t kElems = 32, kVectors = 4;
  template <int R>
  static HWY_INLINE void Block(const PackedColumns& g, int64_t b, const QuantizedRun& x, __m512 (&acc)[R],
                              bool ahead) {
    __m512i codes[8];
    for (int i = 0; i < 4; ++i) {
      const __m512i t = g.Vector(b, i);
      codes[i] = _mm512_and_si512(t, Nibbles());                            // elements 4i..
      codes[4 + i] = _mm512_and_si512(_mm512_srli_epi16(t, 4), Nibbles());  // 16 + 4i..
    }
    Step<R, 8, true, false>(codes, g.F16(b), _mm512_setzero_ps(), x, 32 * b, acc);
  }
};

struct Q4_KFormat {
  static constexpr int64_t kElems = 256, kVectors = 36;
  // Vector i of qs chunk `chunk` (qs bytes 32 chunk + 4i ..).
  static constexpr int64_t Qs(int chunk, int i) { return 4 + 8 * chunk + i; }
  template <int R>
  static HWY_INLINE void Block(const PackedColumns& g, int64_t b, const QuantizedRun& x, __m512 (&acc)[R],
                              bool ahead) {
    const Q4KScales scales(g, b);
    for (int chunk = 0; chunk < 4; ++chunk) {
      for (int h = 0; h < 2; ++h) {
        const int j = 2 * chunk + h;  // sub-block: low nibbles, then high nibbles
        if (ahead) g.Prefetch(b + 1, j, 8);
        __m512i codes[8];
        for (int i = 0; i < 8; ++i) {
          const __m512i t = g.Vector(b, Qs(chunk, i));
          codes[i] = _mm512_and_si512(h ? _mm512_srli_epi16(t, 4) : t, Nibbles());
        }
        Step<R, 8, false, true>(codes, scales.Scale(j), scales.Min(j), x, 256 * b + 32 * j, acc);
      }
    }
  }
};

struct Q6_KFormat {
  static constexpr int64_t kElems = 256, kVectors = 68;
  // Packed vectors: codes 0-63 (4 per 16-element group), int8 scales 64-67 (16 bytes per group).
  static constexpr int64_t kScales = 64;
  template <int R>
  static HWY_INLINE void Block(const PackedColumns& g, int64_t b, const QuantizedRun& x, __m512 (&acc)[R],
                              bool ahead) {
    const __m512 d = g.F16(b);
    for (int group = 0; group < 16; ++group) {
      if (R > 1 && group % 2 == 0) g.Prefetch(b + 1, group / 2, 8);
      __m512i codes[4];
      for (int i = 0; i < 4; ++i) codes[i] = g.Vector(b, 4 * group + i);
      const auto* sc = reinterpret_cast<const __m128i*>(g.VectorPtr(b, kScales + group / 4) + 16 * (group % 4));
      const __m512 wscale = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(sc))));
      Step<R, 4, true, false>(codes, wscale, _mm512_setzero_ps(), x, 256 * b + 16 * group, acc);
    }
  }
};

// y[r, c] for R activation rows from m and the columns of g. With several rows a block takes
// long enough that the hardware prefetcher falls behind and memory stops overlapping compute,
// so the formats ask for the lines ahead when R > 1: Q8_0 and Q4_0 here, 4 KB ahead; the
// K-quants inside Block, an eighth of the next super-block per sub-block step (asking for a
// whole super-block at once made them 10-25% slower). Qwen3-0.6B's LM head, 2 threads, EPYC
// (2026-12-04), interleaved runs: 16 rows Q8_0 14.5-15.0 -> 12.4-13.4 ms, Q4_K 13.0-21.6 ->
// 10.5-15.8 ms, Q6_K 21.1 -> 14.6-18.0 ms; 4 rows Q6_K 13.3-13.6 -> 7.9-9.2 ms. Q8_0 and Q4_0
// asked 1 KB ahead until the faster 16-row blocks outran that distance: the LM-head shape at
// 16 rows, 2 threads, EPYC (Zen 5, 2026-12-07), 6.57-6.88 -> 6.05-6.32 ms with 4 KB (2 KB
// alike, 8 KB slower); two K-quant super-blocks ahead instead of one measured slower for 16 rows.
// One row is bound by memory. On the EPYC of 2026-12-04 the hardware followed its stream:
// asking made Q8_0 no faster, Q4_K 10-40% slower and Q6_K (since its codes are bytes) 6.1-6.3
// -> 7.4-7.5 ms with 1 thread. On the Xeon one row gains from asking (Qwen3-0.6B decode at 512
// context, 2 threads, interleaved: Q8_0 28.2-30.2 -> 26.6-27.1 ms, Q4_K 20.9-21.8 -> 17.6-18.0
// ms), and on the Zen 5 EPYC (same measurement: Q8_0 17.1-17.7 -> 16.3-16.9 ms, Q4_K 15.6-16.0
// -> 11.3-11.7 ms), so those ask 1 KB ahead for one row too (PrefetchOneRow; Q6_K, not measured
// there, keeps asking only for several).
template <class F, int R>
HWY_NOINLINE void GroupRows(const PackedColumns& g, const QuantizedRows& xq, int64_t m, int64_t K,
                            float* y, int64_t y_stride) {
  constexpr int64_t kAhead = (R > 1 ? 4096 : 1024) / (64 * F::kVectors);  // blocks
  const bool ahead = R > 1 || PrefetchOneRow();
  const QuantizedRun x = xq.Run(m);
  // Both loops unrolled, so the accumulators live in registers only: otherwise GCC kept a copy
  // in memory, storing all R after every block (1 thread, 16 rows, interleaved: Q6_K 3072x1024
  // 185-188 -> 170-176 us, Q8_0 145-154 -> 142-144).
  __m512 acc[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < K / F::kElems; ++b) {
    if (F::kElems == 32 && ahead) g.Prefetch(b + kAhead);
    F::template Block<R>(g, b, x, acc, ahead);
  }
  const __mmask16 mask = static_cast<__mmask16>((1u << g.count) - 1);
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(y + r * y_stride, mask, acc[r]);
}

template <class F>
void Avx3Columns(const QuantizedRows& xq, const WeightRef& w, int64_t n_begin, int64_t n_end,
                 float* y) {
  const int64_t M = xq.rows, Nout = w.rows;
  for (int64_t n = n_begin; n < n_end; n += kQCols) {
    const PackedColumns g = MakeGroup(w, F::kVectors, n, n_end);
    // Row tiles of 16, then 8, 4, 2, 1: any M in few passes over the group's (cached) weights.
    int64_t m = 0;
    for (; m + kQRowTile <= M; m += kQRowTile) GroupRows<F, kQRowTile>(g, xq, m, w.cols, y + m * Nout + n, Nout);
    if (M - m >= 8) GroupRows<F, 8>(g, xq, m, w.cols, y + m * Nout + n, Nout), m += 8;
    if (M - m >= 4) GroupRows<F, 4>(g, xq, m, w.cols, y + m * Nout + n, Nout), m += 4;
    if (M - m >= 2) GroupRows<F, 2>(g, xq, m, w.cols, y + m * Nout + n, Nout), m += 2;
    if (M - m >= 1) GroupRows<F, 1>(g, xq, m, w.cols, y + m * Nout + n, Nout);
  }
}

}  // namespace dflash::ops::HWY_NAMESPACE
DFLASH_VNNI_AMX_TARGET_END
#endif  // HWY_TARGET == HWY_AVX3_DL
HWY_AFTER_NAMESPACE();

#endif  // include guard toggle
