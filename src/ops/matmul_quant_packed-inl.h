// Packed weight columns as the AVX3_DL kernels read them (ops/weight_pack.h): 16 columns per
// group, lane c of a code vector holding 4 codes of column c; their f16 scales, Q4_K's scales
// and mins, and the f32 operations every output element gets per block (ScaleBlock), shared by
// the VNNI (matmul_quant_vnni-inl.h) and AMX (matmul_quant_amx-inl.h) kernels.
#if defined(DFLASH_OPS_MATMUL_QUANT_PACKED_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef DFLASH_OPS_MATMUL_QUANT_PACKED_INL_H_
#undef DFLASH_OPS_MATMUL_QUANT_PACKED_INL_H_
#else
#define DFLASH_OPS_MATMUL_QUANT_PACKED_INL_H_
#endif

#include <algorithm>
#include <cstdint>

#include "core/tensor.h"
#include "hwy/highway.h"
#include "ops/matmul_quant_cpu.h"
#include "ops/quant_activations.h"
#include "ops/quant_blocks.h"
#include "ops/weight_pack.h"

HWY_BEFORE_NAMESPACE();
#if HWY_TARGET == HWY_AVX3_DL
DFLASH_VNNI_AMX_TARGET_BEGIN
namespace dflash::ops::HWY_NAMESPACE {
using namespace quant;
namespace hn = hwy::HWY_NAMESPACE;

inline __m512i Nibbles() { return _mm512_set1_epi8(0x0F); }

// The f16 in the low (kHigh: high) half of every dword, as f32.
template <bool kHigh = false>
inline __m512 F16Lanes(__m512i v) {
  if (kHigh) v = _mm512_srli_epi32(v, 16);
  return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(v));
}

// acc += (wscale * d_x) * isum, then (kMin) acc -= wmin * (sum of the row's inputs in the
// block): the f32 operations every output element gets per block, in both the VNNI and the
// tile path.
template <bool kMin>
HWY_INLINE void ScaleBlock(__m512i isum, __m512 wscale, __m512 wmin, float dx, float bsum, __m512& acc) {
  const __m512 s = _mm512_mul_ps(wscale, _mm512_set1_ps(dx));
  acc = _mm512_fmadd_ps(s, _mm512_cvtepi32_ps(isum), acc);
  if (kMin) acc = _mm512_fnmadd_ps(wmin, _mm512_set1_ps(bsum), acc);
}

// The integer sums of a block start at -offset * (sum of the x codes it covers): row m's
// start for the 32 (Q = 8) or 16 (Q = 4) elements from k0; row m + r's is r further.
template <int Q>
HWY_INLINE const int32_t* CodeInit(const QuantizedRun& x, int64_t k0) {
  return Q == 8 ? x.Init32(k0) : x.Init16(k0);
}

HWY_INLINE void PrefetchLine(const uint8_t* p) { _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0); }

// A column group: 16 * row_bytes contiguous bytes, blocks in pairs (ops/weight_pack.h).
struct PackedColumns {
  const uint8_t* base;
  int64_t blocks;      // blocks per row
  int64_t vectors;     // vectors per block
  int64_t f16_bytes;   // per block: PackedF16Bytes
  int count;           // real columns; the padding rows are zeros
  // Vector v of block b; the 16 f16 of block b.
  HWY_INLINE __m512i Vector(int64_t b, int64_t v) const { return _mm512_loadu_si512(VectorPtr(b, v)); }
  HWY_INLINE const uint8_t* VectorPtr(int64_t b, int64_t v) const {
    return base + PackedVectorsAt(b, 64 * vectors, f16_bytes) + 64 * v;
  }
  // Asks for part `part` of `parts` of block b's code lines. Groups lie one after another, so
  // past the last block this asks for the next group's first blocks, which the kernel reads
  // next; past the buffer's end a prefetch never faults. Stopping at the group's end left every
  // group's first blocks to the hardware: Qwen3-0.6B's LM head (4 super-blocks per group), 2
  // threads, Zen 5 EPYC, 3 interleaved runs: one row Q4_K 2.29-2.46 -> 1.38-1.72 ms, Q8_0
  // 3.15-4.27 -> 2.84-3.44; 16 rows Q4_K 5.78-6.02 -> 5.11-5.37, Q8_0 5.61-6.18 -> 4.85-5.34.
  HWY_INLINE void Prefetch(int64_t b, int64_t part = 0, int64_t parts = 1) const {
    for (int64_t v = vectors * part / parts; v < vectors * (part + 1) / parts; ++v) PrefetchLine(VectorPtr(b, v));
  }
  HWY_INLINE __m512 F16(int64_t b) const {
    const uint8_t* p = base + PackedF16At(b, blocks, 64 * vectors, f16_bytes);
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
};

// The group of columns n .. n + 15 (at most up to n_end) of a format with `vectors` per block.
inline PackedColumns MakeGroup(const WeightRef& w, int64_t vectors, int64_t n, int64_t n_end) {
  return {PackedGroup(w, n / kPackRows), w.cols / BlockElems(w.dtype), vectors, PackedF16Bytes(w.dtype),
          static_cast<int>(std::min(kQCols, n_end - n))};
}

// Q4_K's per-column scales of one super-block: sub-block j's weight scale d * sc_j and min
// dmin * m_j, each one f32 product, in every path.
struct Q4KScales {
  __m512 d, dmin;
  // The 12 packed scale bytes as words w0..w2 (see Q4KScaleMin): bytes j of sc_lo / m_lo
  // are sub-blocks j < 4, bytes of sc_hi / m_hi sub-blocks 4 + j.
  __m512i sc_lo, m_lo, sc_hi, m_hi;

  HWY_INLINE Q4KScales(const PackedColumns& g, int64_t b) {
    const __m512i dd = g.Vector(b, 0);
    d = F16Lanes(dd);
    dmin = F16Lanes<true>(dd);
    const __m512i w0 = g.Vector(b, 1), w1 = g.Vector(b, 2), w2 = g.Vector(b, 3);
    const __m512i six = _mm512_set1_epi8(63), low4 = Nibbles(), top2 = _mm512_set1_epi8(3);
    sc_lo = _mm512_and_si512(w0, six);
    m_lo = _mm512_and_si512(w1, six);
    sc_hi = _mm512_or_si512(_mm512_and_si512(w2, low4),
                            _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(w0, 6), top2), 4));
    m_hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(w2, 4), low4),
                           _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(w1, 6), top2), 4));
  }
  HWY_INLINE __m512 Scale(int j) const { return _mm512_mul_ps(d, SubBlockByte(j < 4 ? sc_lo : sc_hi, j)); }
  HWY_INLINE __m512 Min(int j) const { return _mm512_mul_ps(dmin, SubBlockByte(j < 4 ? m_lo : m_hi, j)); }

 private:
  static HWY_INLINE __m512 SubBlockByte(__m512i v, int j) {
    return _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(v, 8 * (j % 4)), _mm512_set1_epi32(0xFF)));
  }
};

}  // namespace dflash::ops::HWY_NAMESPACE
DFLASH_VNNI_AMX_TARGET_END
#endif  // HWY_TARGET == HWY_AVX3_DL
HWY_AFTER_NAMESPACE();

#endif  // include guard toggle
