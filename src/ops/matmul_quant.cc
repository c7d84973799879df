// y = x · Wᵀ for block-quantised W (Q8_0, Q4_0, Q4_K, Q6_K): integer dot products of int8
// activation codes (ops/quant_activations.h) with the weights' codes, scaled per block.
//
// Numerics. Weights are used exactly as DequantizeRow decodes them; the only approximation is
// the activation rounding, |x - d_b q| <= d_b / 2 with d_b = max|x in block b| / 127, so
// |y - x·W| <= sum_b d_b / 2 * sum_{i in b} |W_i|, plus f32 rounding of the scaled sums.
// The integer part of every block dot is exact, so VNNI and the portable path agree on it.
//
// Batch invariance: every y[m, n] is one f32 accumulator walking the row's sub-blocks in order
// (acc += (w scale * x scale) * exact integer sum, then Q4_K's min term), then the bias; tiles
// and threads only choose which (m, n) share a pass.
//
// Targets: AVX3_DL (Ice Lake, Zen 4 and later; Highway checks AVX512_VNNI for it) computes 16
// output columns per vector: the 16 weight rows' codes of a sub-block are transposed in
// registers so that lane c of a vector holds 4 codes of column c, and one vpdpbusd against 4
// broadcast activation codes advances all 16 columns. The transposed codes then stay in
// registers for up to 16 activation rows, so a 16-row verify reads and unpacks each weight
// block once (the decode shape, one row, is bound by memory either way). Other targets run a
// portable scalar-integer path.
//
// AMX (ops/amx.h): with 8 or more rows, Q8_0 and Q4_K use int8 tile dot products instead,
// which do a 16-column x 16-row x 32-element block in one instruction; each output element
// still gets exactly Step()'s f32 operations, so the two paths agree bit for bit.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/matmul_quant.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"

#ifndef DFLASH_OPS_MATMUL_QUANT_ONCE
#define DFLASH_OPS_MATMUL_QUANT_ONCE
#include <algorithm>
#include <vector>

#include "core/error.h"
#include "ops/amx.h"
#include "ops/column_tasks.h"
#include "ops/matmul_quant.h"
#include "ops/quant_activations.h"
#include "ops/quant_blocks.h"
namespace dflash::ops {
// Output columns per vector (16 f32 / int32 lanes) and the most activation rows per pass.
constexpr int64_t kQCols = 16;
constexpr int64_t kQRowTile = 16;

// Code offset the activation lanes are pre-biased for (see quant_activations.h).
inline int CodeOffset(DType t) {
  switch (t) {
    case DType::kQ8_0: return 128;
    case DType::kQ4_0: return 8;
    case DType::kQ6_K: return 32;
    default: return 0;  // Q4_K: unsigned codes, its mins are applied separately
  }
}

// Formats with a tile kernel, and the fewest rows for which it beats VNNI: a tile step costs
// the same for 1 or 16 rows (bench/matmul_bench.cc: about even at 8 rows, 1.5x faster at 16).
inline bool HasAmxKernel(DType t) { return t == DType::kQ8_0 || t == DType::kQ4_K; }
constexpr int64_t kAmxMinRows = 8;
}  // namespace dflash::ops
#endif

HWY_BEFORE_NAMESPACE();
#if HWY_TARGET == HWY_AVX3_DL
#if HWY_COMPILER_CLANG
#pragma clang attribute push(__attribute__((target("avx512vnni,amx-tile,amx-int8"))), apply_to = function)
#else
#pragma GCC target("avx512vnni,amx-tile,amx-int8")
#endif
#endif
namespace dflash::ops::HWY_NAMESPACE {

using namespace quant;
namespace hn = hwy::HWY_NAMESPACE;

// Quantises M rows of x (see quant_activations.h). Vectorised because it runs once per
// MatMul on the calling thread while the pool waits; every step is a function of one row.
void QuantizeActivations(const float* x, int64_t M, int64_t K, int offset, QuantizedRows& out) {
  out.rows = M;
  out.k = K;
  out.k_pad = (K + 63) / 64 * 64;
  out.tiles = 0;
  const int64_t kp = out.k_pad;
  // assign() rather than resize(): the padding must be zero whatever an earlier call left.
  out.codes.assign(M * kp, 0);
  out.init16.assign(M * kp / 16, 0);
  out.block_scale.assign(M * kp / 32, 0.0f);
  out.block_sum.assign(M * kp / 32, 0.0f);
  const hn::CappedTag<float, 16> df;
  const hn::RebindToSigned<decltype(df)> di;
  const hn::Rebind<int8_t, decltype(df)> d8;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const auto lo = hn::Set(di, -127), hi = hn::Set(di, 127);
  for (int64_t r = 0; r < M; ++r) {
    for (int64_t b = 0; b < K / 32; ++b) {
      const float* xb = x + r * K + 32 * b;
      auto amax = hn::Zero(df), sum = hn::Zero(df);
      for (int64_t j = 0; j < 32; j += N) {
        const auto v = hn::LoadU(df, xb + j);
        amax = hn::Max(amax, hn::Abs(v));
        sum = hn::Add(sum, v);
      }
      const float d = hn::GetLane(hn::MaxOfLanes(df, amax)) / 127.0f;
      const float id = d == 0.0f ? 0.0f : 1.0f / d;
      const auto vid = hn::Set(df, id);
      int8_t* codes = out.codes.data() + r * kp + 32 * b;
      int32_t code_sum[2] = {0, 0};  // per 16 codes; N divides 16
      for (int64_t j = 0; j < 32; j += N) {
        const auto q = hn::Min(hn::Max(hn::NearestInt(hn::Mul(hn::LoadU(df, xb + j), vid)), lo), hi);
        hn::StoreU(hn::DemoteTo(d8, q), d8, codes + j);
        code_sum[j / 16] += hn::GetLane(hn::SumOfLanes(di, q));
      }
      out.block_scale[r * kp / 32 + b] = d;
      out.block_sum[r * kp / 32 + b] = hn::GetLane(hn::SumOfLanes(df, sum));
      for (int h = 0; h < 2; ++h) out.init16[r * kp / 16 + 2 * b + h] = -offset * code_sum[h];
    }
  }
}

// ------------------------------------------------------------------------------------------
// Portable path: decode one weight row into signed codes with a scale per 16 elements (and
// Q4_K's mins per 32), then exact integer sums per 16 elements for every x row.
struct DecodedRow {
  std::vector<int8_t> codes;  // [K] code - offset
  std::vector<float> scale;   // [K/16]
  std::vector<float> mins;    // [K/32] Q4_K: dmin * m, else empty
};

void DecodeRow(const WeightRef& w, int64_t n, DecodedRow& out) {
  const int64_t K = w.cols;
  const uint8_t* row = w.Row(n);
  out.codes.resize(K);
  out.scale.resize(K / 16);
  out.mins.assign(w.dtype == DType::kQ4_K ? K / 32 : 0, 0.0f);
  switch (w.dtype) {
    case DType::kQ8_0:
    case DType::kQ4_0:
      for (int64_t b = 0; b < K / 32; ++b) {
        const uint8_t* blk = row + b * BlockBytes(w.dtype);
        const float d = LoadF16(blk);
        out.scale[2 * b] = out.scale[2 * b + 1] = d;
        for (int j = 0; j < 32; ++j) {
          out.codes[32 * b + j] = w.dtype == DType::kQ8_0 ? static_cast<int8_t>(blk[2 + j])
                                                          : static_cast<int8_t>(Q4_0Code(blk, j) - 8);
        }
      }
      return;
    case DType::kQ4_K:
      for (int64_t b = 0; b < K / 256; ++b) {
        const uint8_t* blk = row + b * kQ4_KBytes;
        const float d = LoadF16(blk), dmin = LoadF16(blk + 2);
        for (int j = 0; j < 8; ++j) {
          int sc, m;
          Q4KScaleMin(blk + kQ4_KScales, j, &sc, &m);
          out.scale[16 * b + 2 * j] = out.scale[16 * b + 2 * j + 1] = d * static_cast<float>(sc);
          out.mins[8 * b + j] = dmin * static_cast<float>(m);
        }
        for (int e = 0; e < 256; ++e) out.codes[256 * b + e] = static_cast<int8_t>(Q4KCode(blk, e));
      }
      return;
    case DType::kQ6_K:
      for (int64_t b = 0; b < K / 256; ++b) {
        const uint8_t* blk = row + b * kQ6_KBytes;
        const float d = LoadF16(blk + kQ6_KD);
        const auto* sc = reinterpret_cast<const int8_t*>(blk + kQ6_KScales);
        for (int g = 0; g < 16; ++g) out.scale[16 * b + g] = d * static_cast<float>(sc[g]);
        for (int e = 0; e < 256; ++e) out.codes[256 * b + e] = static_cast<int8_t>(Q6KCode(blk, e) - 32);
      }
      return;
    default:
      Fail("MatMul: dtype ", DTypeName(w.dtype), " is not block-quantised");
  }
}

float PortableDot(const DecodedRow& wr, const QuantizedRows& xq, int64_t m) {
  const int8_t* q = xq.Codes(m);
  const float* dx = xq.BlockScale(m);
  const float* bsum = xq.BlockSum(m);
  float acc = 0.0f;
  for (int64_t g = 0; g < xq.k / 16; ++g) {
    int32_t sum = 0;
    for (int j = 0; j < 16; ++j) sum += int32_t{wr.codes[16 * g + j]} * q[16 * g + j];
    acc += wr.scale[g] * dx[g / 2] * static_cast<float>(sum);
    if (!wr.mins.empty() && g % 2 == 1) acc -= wr.mins[g / 2] * bsum[g / 2];
  }
  return acc;
}

void PortableColumns(const QuantizedRows& xq, const WeightRef& w, int64_t n_begin, int64_t n_end,
                     float* y) {
  DecodedRow wr;
  for (int64_t n = n_begin; n < n_end; ++n) {
    DecodeRow(w, n, wr);
    for (int64_t m = 0; m < xq.rows; ++m) y[m * w.rows + n] = PortableDot(wr, xq, m);
  }
}

#if HWY_TARGET == HWY_AVX3_DL
// ------------------------------------------------------------------------------------------
// AVX3_DL path: 16 output columns per vector. A format decodes, per block of the 16 weight
// rows of a column group, code vectors whose lane c holds 4 consecutive codes of row c, and
// the per-column scales; Step() then runs them against up to 16 activation rows.

inline __m512i Nibbles() { return _mm512_set1_epi8(0x0F); }

// The 16 weight rows of a column group. Rows past the matrix end repeat the last real row:
// their lanes are computed and never stored.
struct ColumnGroup {
  const uint8_t* row[kQCols];
  __m512i offsets;  // row[c] - row[0], for gathers of one dword per row
  int count;        // real columns
};

inline __m512i GatherDword(const ColumnGroup& g, int64_t byte_offset) {
  return _mm512_i32gather_epi32(g.offsets, g.row[0] + byte_offset, 1);
}

// The f16 in the low (kHigh: high) half of every dword, as f32.
template <bool kHigh = false>
inline __m512 F16Lanes(__m512i v) {
  if (kHigh) v = _mm512_srli_epi32(v, 16);
  return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(v));
}

// v[j] lane c = bytes 4j..4j+3 of the 32 bytes at row[c] + off (an 8 x 16 dword transpose).
HWY_INLINE void Transpose32(const ColumnGroup& g, int64_t off, __m512i v[8]) {
  __m512i z[8];  // 128-bit lanes: row i dwords 0-3, 4-7; row i+8 dwords 0-3, 4-7
  for (int i = 0; i < 8; ++i) {
    const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.row[i] + off));
    const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.row[i + 8] + off));
    z[i] = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
  }
  // 4 x 4 dword transposes inside every 128-bit lane, for rows 0-3 (a) and 4-7 (b).
  __m512i u[8];
  for (int half = 0; half < 2; ++half) {
    const __m512i* zz = z + 4 * half;
    const __m512i lo01 = _mm512_unpacklo_epi32(zz[0], zz[1]), hi01 = _mm512_unpackhi_epi32(zz[0], zz[1]);
    const __m512i lo23 = _mm512_unpacklo_epi32(zz[2], zz[3]), hi23 = _mm512_unpackhi_epi32(zz[2], zz[3]);
    u[4 * half + 0] = _mm512_unpacklo_epi64(lo01, lo23);
    u[4 * half + 1] = _mm512_unpackhi_epi64(lo01, lo23);
    u[4 * half + 2] = _mm512_unpacklo_epi64(hi01, hi23);
    u[4 * half + 3] = _mm512_unpackhi_epi64(hi01, hi23);
  }
  // u[d] (rows 0-3) and u[4+d] (rows 4-7) hold dwords d and 4+d in alternate 128-bit lanes.
  const __m512i first = _mm512_set_epi64(13, 12, 5, 4, 9, 8, 1, 0);
  const __m512i second = _mm512_set_epi64(15, 14, 7, 6, 11, 10, 3, 2);
  for (int d = 0; d < 4; ++d) {
    v[d] = _mm512_permutex2var_epi64(u[d], first, u[4 + d]);
    v[4 + d] = _mm512_permutex2var_epi64(u[d], second, u[4 + d]);
  }
}

// v[j] lane c = bytes 4j..4j+3 of the 16 bytes at row[c] + off (a 4 x 16 dword transpose).
HWY_INLINE void Transpose16(const ColumnGroup& g, int64_t off, __m512i v[4]) {
  auto load = [&](int r) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(g.row[r] + off)); };
  __m512i z[4];  // 128-bit lanes: rows k, k+4, k+8, k+12
  for (int k = 0; k < 4; ++k) {
    z[k] = _mm512_inserti32x4(_mm512_inserti32x4(_mm512_inserti32x4(_mm512_castsi128_si512(load(k)),
                                                                    load(k + 4), 1), load(k + 8), 2), load(k + 12), 3);
  }
  const __m512i lo01 = _mm512_unpacklo_epi32(z[0], z[1]), hi01 = _mm512_unpackhi_epi32(z[0], z[1]);
  const __m512i lo23 = _mm512_unpacklo_epi32(z[2], z[3]), hi23 = _mm512_unpackhi_epi32(z[2], z[3]);
  v[0] = _mm512_unpacklo_epi64(lo01, lo23);
  v[1] = _mm512_unpackhi_epi64(lo01, lo23);
  v[2] = _mm512_unpacklo_epi64(hi01, hi23);
  v[3] = _mm512_unpackhi_epi64(hi01, hi23);
}

// acc[r] += (wscale * d_x) * (integer dot of Q code vectors with the row's codes at k0),
// then (kMin) acc[r] -= wmin * (sum of the row's inputs in the 32-block of k0). Q is 8 (a
// 32-element block) or 4 (a 16-element group); kInit applies the codes' offset.
template <int R, int Q, bool kInit, bool kMin>
HWY_INLINE void Step(const __m512i* codes, __m512 wscale, __m512 wmin, const QuantizedRows& xq,
                     int64_t m, int64_t k0, __m512 (&acc)[R]) {
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    const int8_t* xc = xq.Codes(m + r) + k0;
    int32_t init = 0;
    if (kInit) {
      const int32_t* i16 = xq.Init16(m + r) + k0 / 16;
      init = Q == 8 ? i16[0] + i16[1] : i16[0];
    }
    // With few rows a single vpdpbusd chain would wait on its own latency; integer sums are
    // exact, so splitting the chain changes no bit.
    constexpr int kChains = R == 1 ? 4 : R == 2 ? 2 : 1;
    __m512i part[kChains];
    part[0] = _mm512_set1_epi32(init);
    for (int c = 1; c < kChains; ++c) part[c] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int q = 0; q < Q; ++q) {
      int32_t x4;
      __builtin_memcpy(&x4, xc + 4 * q, 4);
      part[q % kChains] = _mm512_dpbusd_epi32(part[q % kChains], codes[q], _mm512_set1_epi32(x4));
    }
    __m512i isum = part[0];
    for (int c = 1; c < kChains; ++c) isum = _mm512_add_epi32(isum, part[c]);
    const __m512 s = _mm512_mul_ps(wscale, _mm512_set1_ps(xq.BlockScale(m + r)[k0 / 32]));
    acc[r] = _mm512_fmadd_ps(s, _mm512_cvtepi32_ps(isum), acc[r]);
    if (kMin) acc[r] = _mm512_fnmadd_ps(wmin, _mm512_set1_ps(xq.BlockSum(m + r)[k0 / 32]), acc[r]);
  }
}

struct Q8_0Format {
  static constexpr int64_t kElems = 32;
  template <int R>
  static HWY_INLINE void Block(const ColumnGroup& g, int64_t b, const QuantizedRows& xq, int64_t m,
                               __m512 (&acc)[R]) {
    const int64_t off = b * kQ8_0Bytes;
    __m512i codes[8];
    Transpose32(g, off + 2, codes);
    for (__m512i& c : codes) c = _mm512_xor_si512(c, _mm512_set1_epi8(static_cast<char>(0x80)));
    Step<R, 8, true, false>(codes, F16Lanes(GatherDword(g, off)), _mm512_setzero_ps(), xq, m, 32 * b, acc);
  }
};

struct Q4_0Format {
  static constexpr int64_t kElems = 32;
  template <int R>
  static HWY_INLINE void Block(const ColumnGroup& g, int64_t b, const QuantizedRows& xq, int64_t m,
                               __m512 (&acc)[R]) {
    const int64_t off = b * kQ4_0Bytes;
    __m512i t[4], codes[8];
    Transpose16(g, off + 2, t);
    for (int i = 0; i < 4; ++i) {
      codes[i] = _mm512_and_si512(t[i], Nibbles());                            // elements 4i..
      codes[4 + i] = _mm512_and_si512(_mm512_srli_epi16(t[i], 4), Nibbles());  // 16 + 4i..
    }
    Step<R, 8, true, false>(codes, F16Lanes(GatherDword(g, off)), _mm512_setzero_ps(), xq, m, 32 * b, acc);
  }
};

// Q4_K's per-column scales of one super-block: sub-block j's weight scale d * sc_j and min
// dmin * m_j, each one f32 product, in every path.
struct Q4KScales {
  __m512 d, dmin;
  // The 12 packed scale bytes as words w0..w2 (see Q4KScaleMin): bytes j of sc_lo / m_lo
  // are sub-blocks j < 4, bytes of sc_hi / m_hi sub-blocks 4 + j.
  __m512i sc_lo, m_lo, sc_hi, m_hi;

  HWY_INLINE Q4KScales(const ColumnGroup& g, int64_t off) {
    const __m512i dd = GatherDword(g, off);
    d = F16Lanes(dd);
    dmin = F16Lanes<true>(dd);
    const __m512i w0 = GatherDword(g, off + kQ4_KScales), w1 = GatherDword(g, off + kQ4_KScales + 4);
    const __m512i w2 = GatherDword(g, off + kQ4_KScales + 8);
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

struct Q4_KFormat {
  static constexpr int64_t kElems = 256;
  template <int R>
  static HWY_INLINE void Block(const ColumnGroup& g, int64_t b, const QuantizedRows& xq, int64_t m,
                               __m512 (&acc)[R]) {
    const int64_t off = b * kQ4_KBytes;
    const Q4KScales scales(g, off);
    for (int chunk = 0; chunk < 4; ++chunk) {
      __m512i t[8];
      Transpose32(g, off + kQ4_KQs + 32 * chunk, t);
      for (int h = 0; h < 2; ++h) {
        const int j = 2 * chunk + h;  // sub-block: low nibbles, then high nibbles
        __m512i codes[8];
        for (int i = 0; i < 8; ++i) codes[i] = _mm512_and_si512(h ? _mm512_srli_epi16(t[i], 4) : t[i], Nibbles());
        Step<R, 8, false, true>(codes, scales.Scale(j), scales.Min(j), xq, m, 256 * b + 32 * j, acc);
      }
    }
  }
};

struct Q6_KFormat {
  static constexpr int64_t kElems = 256;
  template <int R>
  static HWY_INLINE void Block(const ColumnGroup& g, int64_t b, const QuantizedRows& xq, int64_t m,
                               __m512 (&acc)[R]) {
    const int64_t off = b * kQ6_KBytes;
    const __m512 d = F16Lanes<true>(GatherDword(g, off + kQ6_KD - 2));  // d is the block's last 2 bytes
    __m512i sc_words[4];  // int8 scales of groups 4i..4i+3
    for (int i = 0; i < 4; ++i) sc_words[i] = GatherDword(g, off + kQ6_KScales + 4 * i);
    const __m512i low4 = Nibbles(), two = _mm512_set1_epi8(3);
    for (int half = 0; half < 2; ++half) {
      __m512i a[8], bq[8], c[8];  // ql bytes 0-31, ql 32-63, qh 0-31 of this half
      Transpose32(g, off + 64 * half, a);
      Transpose32(g, off + 64 * half + 32, bq);
      Transpose32(g, off + kQ6_KQh + 32 * half, c);
      for (int quarter = 0; quarter < 4; ++quarter) {
        // Quarter q: nibbles of a (q even) or bq (odd), low (q < 2) or high; qh bits 2q, 2q+1.
        __m512i codes[8];
        for (int i = 0; i < 8; ++i) {
          const __m512i src = quarter % 2 == 0 ? a[i] : bq[i];
          const __m512i lo = _mm512_and_si512(quarter < 2 ? src : _mm512_srli_epi16(src, 4), low4);
          const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(c[i], 2 * quarter), two);
          codes[i] = _mm512_or_si512(lo, _mm512_slli_epi16(hi, 4));
        }
        for (int part = 0; part < 2; ++part) {
          const int group = 8 * half + 2 * quarter + part;
          const __m512i sc = _mm512_srai_epi32(_mm512_slli_epi32(sc_words[group / 4], 24 - 8 * (group % 4)), 24);
          Step<R, 4, true, false>(codes + 4 * part, _mm512_mul_ps(d, _mm512_cvtepi32_ps(sc)), _mm512_setzero_ps(),
                                  xq, m, 256 * b + 16 * group, acc);
        }
      }
    }
  }
};

// y[r, c] for R activation rows from m and the columns of g.
template <class F, int R>
HWY_NOINLINE void GroupRows(const ColumnGroup& g, const QuantizedRows& xq, int64_t m, int64_t K,
                            float* y, int64_t y_stride) {
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < K / F::kElems; ++b) F::template Block<R>(g, b, xq, m, acc);
  const __mmask16 mask = static_cast<__mmask16>((1u << g.count) - 1);
  for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(y + r * y_stride, mask, acc[r]);
}

// Weight rows n.. of w, at most up to n_end.
ColumnGroup MakeGroup(const WeightRef& w, int64_t n, int64_t n_end) {
  ColumnGroup g;
  g.count = static_cast<int>(std::min(kQCols, n_end - n));
  alignas(64) int32_t offsets[kQCols];
  for (int c = 0; c < kQCols; ++c) {
    g.row[c] = w.Row(n + std::min(c, g.count - 1));
    offsets[c] = static_cast<int32_t>(g.row[c] - g.row[0]);
  }
  g.offsets = _mm512_load_si512(offsets);
  return g;
}

template <class F>
void Avx3Columns(const QuantizedRows& xq, const WeightRef& w, int64_t n_begin, int64_t n_end,
                 float* y) {
  const int64_t M = xq.rows, Nout = w.rows;
  for (int64_t n = n_begin; n < n_end; n += kQCols) {
    const ColumnGroup g = MakeGroup(w, n, n_end);
    // Row tiles of 16, then 8, 4, 2, 1: any M in few passes over the group's (cached) weights.
    int64_t m = 0;
    for (; m + kQRowTile <= M; m += kQRowTile) GroupRows<F, kQRowTile>(g, xq, m, w.cols, y + m * Nout + n, Nout);
    if (M - m >= 8) GroupRows<F, 8>(g, xq, m, w.cols, y + m * Nout + n, Nout), m += 8;
    if (M - m >= 4) GroupRows<F, 4>(g, xq, m, w.cols, y + m * Nout + n, Nout), m += 4;
    if (M - m >= 2) GroupRows<F, 2>(g, xq, m, w.cols, y + m * Nout + n, Nout), m += 2;
    if (M - m >= 1) GroupRows<F, 1>(g, xq, m, w.cols, y + m * Nout + n, Nout);
  }
}

// ------------------------------------------------------------------------------------------
// AMX path. A tile dot product computes C[n][r] = sum_k A[n][k] * B[k/4][r][k%4] for 16 x 16
// int32 sums over 32 bytes of k. A is the 16 weight rows' codes of one 32-block, for Q8_0
// straight from memory (the rows are row_bytes apart), for Q4_K split from nibbles into a
// buffer; B is the activation tile QuantizedRows holds (BuildTileLayout), so nothing is
// transposed per block. Lanes of an accumulator are activation rows: acc[n] lane r is
// y[r, n], and it gets Step()'s f32 operations in Step()'s order.

// The tile intrinsics are asm statements that do not tell the compiler which memory they read;
// this makes the buffers written before a tile load visible to it.
HWY_INLINE void MemoryBarrier() { asm volatile("" ::: "memory"); }

// Two tile sets (see TileDot): 3S = A (16 rows x 32 bytes), 3S + 1 = B (8 rows x 64 bytes),
// 3S + 2 = C (16 x 16 int32). The configuration is per thread; the pool's workers each load it
// on first use.
void ConfigureTiles() {
  thread_local bool configured = false;
  if (configured) return;
  alignas(64) uint8_t cfg[64] = {};
  cfg[0] = 1;  // palette 1
  const uint16_t colsb[3] = {32, 64, 64};
  const uint8_t rows[3] = {16, 8, 16};
  for (int t = 0; t < 6; ++t) {
    __builtin_memcpy(cfg + 16 + 2 * t, &colsb[t % 3], 2);
    cfg[48 + t] = rows[t % 3];
  }
  MemoryBarrier();  // _tile_loadconfig's asm names only the first 8 bytes as its input
  _tile_loadconfig(cfg);
  configured = true;
}

// Fills xq's tile layout (see quant_activations.h) from its row-major codes.
void BuildTileLayout(QuantizedRows& xq) {
  const int64_t nb = xq.k_pad / 32, M = xq.rows;
  xq.tiles = (M + kQRowTile - 1) / kQRowTile;
  xq.tile_codes.resize(xq.tiles * nb * 512);  // every byte is written below
  xq.tile_scale.assign(xq.tiles * nb * 16, 0.0f);
  xq.tile_sum.assign(xq.tiles * nb * 16, 0.0f);
  for (int64_t t = 0; t < xq.tiles; ++t) {
    const int64_t rows = std::min(kQRowTile, M - kQRowTile * t);
    ColumnGroup g;  // rows past M repeat the last row; their scales stay zero
    for (int r = 0; r < kQCols; ++r) {
      g.row[r] = reinterpret_cast<const uint8_t*>(xq.Codes(kQRowTile * t + std::min<int64_t>(r, rows - 1)));
    }
    for (int64_t b = 0; b < nb; ++b) {
      __m512i v[8];
      Transpose32(g, 32 * b, v);
      int8_t* dst = xq.tile_codes.data() + (t * nb + b) * 512;
      for (int j = 0; j < 8; ++j) _mm512_storeu_si512(dst + 64 * j, v[j]);
      float* scale = xq.tile_scale.data() + (t * nb + b) * 16;
      float* sum = xq.tile_sum.data() + (t * nb + b) * 16;
      for (int64_t r = 0; r < rows; ++r) {
        scale[r] = xq.BlockScale(kQRowTile * t + r)[b];
        sum[r] = xq.BlockSum(kQRowTile * t + r)[b];
      }
    }
  }
}

// One 32-element step of the tile path: the A operand and the 16 columns' scales (and
// Q4_K's mins), then the C tile the dot product leaves.
struct TileStepData {
  const void* a;
  int64_t a_stride;
  alignas(64) uint8_t a_buf[kQCols * 32];  // A when it cannot be read in place
  alignas(64) float wscale[kQCols];
  alignas(64) float wmin[kQCols];
  alignas(64) int32_t c[kQCols * kQRowTile];
};

// C = A · B for step s of activation tile t, in tile set S (tiles 3S .. 3S + 2), stored to
// st.c. Two sets let the tile unit start a step while the previous one is being stored.
// The tile intrinsics paste their register numbers into asm text, so each set is spelled out.
#define DFLASH_TILE_DOT(A, B, C)                             \
  _tile_loadd(A, st.a, st.a_stride);                         \
  _tile_loadd(B, xq.TileCodes(t, s), 64);                    \
  _tile_zero(C);                                             \
  if constexpr (kSignedA) {                                  \
    _tile_dpbssd(C, A, B);                                   \
  } else {                                                   \
    _tile_dpbusd(C, A, B);                                   \
  }                                                          \
  _tile_stored(C, st.c, 64)

template <int S, bool kSignedA>
HWY_INLINE void TileDot(const QuantizedRows& xq, int64_t t, int64_t s, TileStepData& st) {
  MemoryBarrier();
  if constexpr (S == 0) {
    DFLASH_TILE_DOT(0, 1, 2);
  } else {
    DFLASH_TILE_DOT(3, 4, 5);
  }
}
#undef DFLASH_TILE_DOT

// acc[n] lane r += (wscale[n] * d_x[r]) * C[n][r], then (kMin) acc[n] lane r -= wmin[n] *
// (sum of row r's inputs in the step's block): Step()'s operations, lanes and columns swapped.
template <bool kMin>
HWY_INLINE void TileScale(const QuantizedRows& xq, int64_t t, int64_t s, const TileStepData& st,
                          __m512 (&acc)[kQCols]) {
  const __m512 dx = _mm512_loadu_ps(xq.TileScale(t, s));
  const __m512 bsum = kMin ? _mm512_loadu_ps(xq.TileSum(t, s)) : _mm512_setzero_ps();
#pragma GCC unroll 16
  for (int n = 0; n < kQCols; ++n) {
    const __m512 sc = _mm512_mul_ps(_mm512_set1_ps(st.wscale[n]), dx);
    acc[n] = _mm512_fmadd_ps(sc, _mm512_cvtepi32_ps(_mm512_load_si512(st.c + kQRowTile * n)), acc[n]);
    if (kMin) acc[n] = _mm512_fnmadd_ps(_mm512_set1_ps(st.wmin[n]), bsum, acc[n]);
  }
}

// Tile formats: Prepare(s, st) sets step s's A operand and scales, and prefetches the weights
// a few steps ahead (a tile load waits for all 16 rows, so memory latency would otherwise
// stall the tile unit at every step).
class Q8_0Amx {
 public:
  static constexpr bool kSignedA = true, kMin = false;
  Q8_0Amx(const ColumnGroup& g, int64_t row_bytes) : g_(g), row_bytes_(row_bytes) {}
  HWY_INLINE void Prepare(int64_t s, TileStepData& st) const {
    const int64_t off = s * kQ8_0Bytes;
    if (s % 2 == 0) {  // a line of every row holds about two blocks; fetch eight blocks ahead
      for (int c = 0; c < kQCols; ++c) _mm_prefetch(reinterpret_cast<const char*>(g_.row[c] + off + 8 * kQ8_0Bytes), _MM_HINT_T0);
    }
    _mm512_store_ps(st.wscale, F16Lanes(GatherDword(g_, off)));
    if (g_.count == kQCols) {  // the 16 rows are row_bytes apart: A straight from the weights
      st.a = g_.row[0] + off + 2;
      st.a_stride = row_bytes_;
      return;
    }
    // The matrix's last, partial group repeats its last row.
    for (int c = 0; c < kQCols; ++c) {
      _mm256_store_si256(reinterpret_cast<__m256i*>(st.a_buf + 32 * c),
                         _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g_.row[c] + off + 2)));
    }
    st.a = st.a_buf;
    st.a_stride = 32;
  }

 private:
  const ColumnGroup& g_;
  int64_t row_bytes_;
};

// Steps are sub-blocks: 8 per 256-element super-block, whose scales are decoded at its first.
class Q4_KAmx {
 public:
  static constexpr bool kSignedA = false, kMin = true;
  Q4_KAmx(const ColumnGroup& g, int64_t) : g_(g) {}
  HWY_INLINE void Prepare(int64_t s, TileStepData& st) {
    const int64_t off = s / 8 * kQ4_KBytes;
    const int j = static_cast<int>(s % 8);
    if (j == 0) {
      const Q4KScales scales(g_, off);
      for (int i = 0; i < 8; ++i) {
        _mm512_store_ps(wscale_[i], scales.Scale(i));
        _mm512_store_ps(wmin_[i], scales.Min(i));
      }
    }
    if (j % 2 == 0) {  // one line of every row per two steps, two super-blocks ahead
      const int64_t ahead = off + 2 * kQ4_KBytes + 36 * (j / 2);
      for (int c = 0; c < kQCols; ++c) _mm_prefetch(reinterpret_cast<const char*>(g_.row[c] + ahead), _MM_HINT_T0);
    }
    _mm512_store_ps(st.wscale, _mm512_load_ps(wscale_[j]));
    _mm512_store_ps(st.wmin, _mm512_load_ps(wmin_[j]));
    // Sub-block j: the low (j even) or high nibbles of qs bytes 32 (j / 2) .., 16 rows of 32.
    const int64_t qs = off + kQ4_KQs + 32 * (j / 2);
    for (int i = 0; i < kQCols / 2; ++i) {
      const __m256i r0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g_.row[2 * i] + qs));
      const __m256i r1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g_.row[2 * i + 1] + qs));
      __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(r0), r1, 1);
      if (j % 2) z = _mm512_srli_epi16(z, 4);
      _mm512_store_si512(st.a_buf + 64 * i, _mm512_and_si512(z, Nibbles()));
    }
    st.a = st.a_buf;
    st.a_stride = 32;
  }

 private:
  const ColumnGroup& g_;
  alignas(64) float wscale_[8][kQCols];
  alignas(64) float wmin_[8][kQCols];
};

// acc[c] lane r = y[16 t + r, c] over all steps, in step order. A tile store reaches the
// vector loads only once it has retired, so step s + kDepth's dot product is issued before
// step s is scaled; tile sets alternate between steps.
template <class F>
HWY_INLINE void TileRows(F& format, const QuantizedRows& xq, int64_t t, int64_t steps, __m512 (&acc)[kQCols]) {
  constexpr int64_t kDepth = 4;
  TileStepData st[kDepth];
  const auto issue = [&](int64_t s) {
    if (s >= steps) return;
    TileStepData& d = st[s % kDepth];
    format.Prepare(s, d);
    if (s % 2 == 0) {
      TileDot<0, F::kSignedA>(xq, t, s, d);
    } else {
      TileDot<1, F::kSignedA>(xq, t, s, d);
    }
  };
  for (int64_t s = 0; s < kDepth; ++s) issue(s);
  for (int64_t s = 0; s < steps; ++s) {
    TileScale<F::kMin>(xq, t, s, st[s % kDepth], acc);
    issue(s + kDepth);
  }
}

template <class F>
void AmxColumns(const QuantizedRows& xq, const WeightRef& w, int64_t n_begin, int64_t n_end, float* y) {
  ConfigureTiles();
  const int64_t Nout = w.rows;
  for (int64_t n = n_begin; n < n_end; n += kQCols) {
    const ColumnGroup g = MakeGroup(w, n, n_end);
    F format(g, static_cast<int64_t>(w.row_bytes));
    for (int64_t t = 0; t < xq.tiles; ++t) {
      __m512 acc[kQCols];
      for (__m512& a : acc) a = _mm512_setzero_ps();
      TileRows(format, xq, t, w.cols / 32, acc);
      // acc[c] lane r -> y[r, c]: once per group and tile, so a plain copy.
      alignas(64) float out[kQCols][kQRowTile];
      for (int c = 0; c < kQCols; ++c) _mm512_store_ps(out[c], acc[c]);
      const int64_t rows = std::min(kQRowTile, xq.rows - kQRowTile * t);
      float* yt = y + kQRowTile * t * Nout + n;
      for (int64_t r = 0; r < rows; ++r)
        for (int c = 0; c < g.count; ++c) yt[r * Nout + c] = out[c][r];
    }
  }
}
#endif  // HWY_TARGET == HWY_AVX3_DL

void Columns(const QuantizedRows& xq, const WeightRef& w, int64_t n_begin, int64_t n_end, float* y) {
#if HWY_TARGET == HWY_AVX3_DL
  if (xq.tiles > 0) {
    switch (w.dtype) {
      case DType::kQ8_0: return AmxColumns<Q8_0Amx>(xq, w, n_begin, n_end, y);
      case DType::kQ4_K: return AmxColumns<Q4_KAmx>(xq, w, n_begin, n_end, y);
      default: break;
    }
  }
  switch (w.dtype) {
    case DType::kQ8_0: return Avx3Columns<Q8_0Format>(xq, w, n_begin, n_end, y);
    case DType::kQ4_0: return Avx3Columns<Q4_0Format>(xq, w, n_begin, n_end, y);
    case DType::kQ4_K: return Avx3Columns<Q4_KFormat>(xq, w, n_begin, n_end, y);
    case DType::kQ6_K: return Avx3Columns<Q6_KFormat>(xq, w, n_begin, n_end, y);
    default: break;
  }
#endif
  PortableColumns(xq, w, n_begin, n_end, y);
}

// amx: use the tile kernel (the caller checked the CPU and the format).
void MatMulQuantImpl(const float* x, int64_t M, const WeightRef& w, const float* bias, float* y, bool amx,
                     QuantizedRows& xq, ThreadPool& pool) {
  QuantizeActivations(x, M, w.cols, CodeOffset(w.dtype), xq);
#if HWY_TARGET == HWY_AVX3_DL
  if (amx) BuildTileLayout(xq);
#endif
  const int64_t Nout = w.rows;
  ForColumnTasks(xq.rows, Nout, kQCols, bias, y, pool,
                 [&](int64_t n_begin, int64_t n_end) { Columns(xq, w, n_begin, n_end, y); });
}

}  // namespace dflash::ops::HWY_NAMESPACE
#if HWY_TARGET == HWY_AVX3_DL && HWY_COMPILER_CLANG
#pragma clang attribute pop
#endif
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace dflash::ops {
HWY_EXPORT(MatMulQuantImpl);

void MatMulQuantized(const float* x, int64_t M, const WeightRef& w, const float* bias, float* y,
                     ThreadPool& pool) {
  if (!quant::IsBlockQuantized(w.dtype)) Fail("MatMulQuantized: dtype ", DTypeName(w.dtype), " is not block-quantised");
  if (w.cols % BlockElems(w.dtype) != 0 || w.row_bytes < RowBytes(w.dtype, w.cols)) {
    Fail("MatMul: ", DTypeName(w.dtype), " weight of ", w.cols, " columns needs whole blocks (",
         BlockElems(w.dtype), ") and ", RowBytes(w.dtype, w.cols), " bytes per row, has ", w.row_bytes);
  }
  // One quantised copy of x per calling thread, reused so decode allocates nothing.
  thread_local QuantizedRows xq;
  const bool amx = M >= kAmxMinRows && HasAmxKernel(w.dtype) && AmxActive();
  HWY_DYNAMIC_DISPATCH(MatMulQuantImpl)(x, M, w, bias, y, amx, xq, pool);
}
}  // namespace dflash::ops
#endif
