// y = x · Wᵀ for block-quantised W (Q8_0, Q4_0, Q4_K, Q6_K): integer dot products of int8
// activation codes (ops/quant_activations.h) with the weights' codes, scaled per block.
//
// Numerics. Weights are used exactly as DequantizeRow decodes them; the only approximation is
// the activation rounding, |x - d_b q| <= d_b / 2 with d_b = max|x in block b| / 127, so
// |y - x·W| <= sum_b d_b / 2 * sum_{i in b} |W_i|, plus f32 rounding of the scaled sums.
// The integer part of every block dot is exact, so VNNI and the portable path agree on it.
//
// Batch invariance: every y[m, n] is one accumulator walking the row's blocks in order, then a
// fixed lane reduction, then the bias; tiles and threads only choose which (m, n) share a pass.
//
// Targets: AVX3_DL (Ice Lake, Zen 4 and later; Highway checks AVX512_VNNI for it) multiplies
// 64 codes per vpdpbusd, two 32-blocks per 512-bit vector: lane i of a pair holds the
// 4-element sum of elements 4i..4i+3, scaled by (weight scale) * (activation scale) and
// added into a per-(row, column) f32 vector. Other targets run a portable scalar-integer path.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/matmul_quant.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"

#ifndef DFLASH_OPS_MATMUL_QUANT_ONCE
#define DFLASH_OPS_MATMUL_QUANT_ONCE
#include <algorithm>
#include <vector>

#include "core/error.h"
#include "ops/column_tasks.h"
#include "ops/matmul_quant.h"
#include "ops/quant_activations.h"
#include "ops/quant_blocks.h"
namespace dflash::ops {
constexpr int64_t kQRowTile = 4;
constexpr int64_t kQColTile = 4;
constexpr int64_t kQRowBlock = 64;

// Code offset the activation lanes are pre-biased for (see quant_activations.h).
inline int CodeOffset(DType t) {
  switch (t) {
    case DType::kQ8_0: return 128;
    case DType::kQ4_0: return 8;
    case DType::kQ6_K: return 32;
    default: return 0;  // Q4_K: unsigned codes, its mins are applied separately
  }
}
}  // namespace dflash::ops
#endif

HWY_BEFORE_NAMESPACE();
#if HWY_TARGET == HWY_AVX3_DL
#if HWY_COMPILER_CLANG
#pragma clang attribute push(__attribute__((target("avx512vnni"))), apply_to = function)
#else
#pragma GCC target("avx512vnni")
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
  const int64_t kp = out.k_pad;
  // assign() rather than resize(): the padding must be zero whatever an earlier call left.
  out.codes.assign(M * kp, 0);
  out.lane_scale.assign(M * kp / 4, 0.0f);
  out.lane_init.assign(M * kp / 4, 0);
  out.block_scale.assign(M * kp / 32, 0.0f);
  out.block_sum.assign(M * kp / 32, 0.0f);
  const hn::CappedTag<float, 16> df;
  const hn::RebindToSigned<decltype(df)> di;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  HWY_ALIGN int32_t q[32];
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
      for (int64_t j = 0; j < 32; j += N) {
        hn::Store(hn::NearestInt(hn::Mul(hn::LoadU(df, xb + j), vid)), di, q + j);
      }
      int8_t* codes = out.codes.data() + r * kp + 32 * b;
      for (int j = 0; j < 32; ++j) codes[j] = static_cast<int8_t>(std::clamp(q[j], -127, 127));
      out.block_scale[r * kp / 32 + b] = d;
      out.block_sum[r * kp / 32 + b] = hn::GetLane(hn::SumOfLanes(df, sum));
      for (int l = 0; l < 8; ++l) {
        const int64_t lane = r * kp / 4 + 8 * b + l;
        out.lane_scale[lane] = d;
        out.lane_init[lane] = -offset * (codes[4 * l] + codes[4 * l + 1] + codes[4 * l + 2] + codes[4 * l + 3]);
      }
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
// AVX3_DL path. A format supplies, per 256-element group of a row (Q8_0/Q4_0: 64 elements),
// Begin() to decode the group's scales once, then Pair(p) giving the 64 unsigned codes and the
// 16 lane scales of the group's p-th 64-element pair.

inline __m512i Nibbles() { return _mm512_set1_epi8(0x0F); }

// Lane i of pair p covers elements 4i..4i+3 of the pair; these tables give the index of the
// scale (within the group's scale vector) that each lane uses.
struct PairIndex {
  alignas(64) int32_t lane[4][16];
};
constexpr PairIndex MakePairIndex(int scales_per_pair, int lanes_per_scale) {
  PairIndex t{};
  for (int p = 0; p < 4; ++p)
    for (int i = 0; i < 16; ++i) t.lane[p][i] = scales_per_pair * p + i / lanes_per_scale;
  return t;
}
constexpr PairIndex kQ4_KIndex = MakePairIndex(2, 8);  // 32-element sub-blocks
constexpr PairIndex kQ6_KIndex = MakePairIndex(4, 4);  // 16-element groups
inline __m512i PairScaleIndex(const PairIndex& t, int p) { return _mm512_load_si512(t.lane[p]); }

// Two consecutive 32-blocks (the second may be absent at an odd row end).
struct BlockPair {
  const uint8_t* b0;
  bool second;
};

// Lanes 0..7: the first block's f16 scale, 8..15: the second's (0 when absent).
inline __m512 PairScales(const BlockPair& s, int block_bytes) {
  uint16_t h0, h1 = 0;
  __builtin_memcpy(&h0, s.b0, 2);
  if (s.second) __builtin_memcpy(&h1, s.b0 + block_bytes, 2);
  const __m128 both = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(h0 | (uint32_t{h1} << 16))));
  return _mm512_permutexvar_ps(_mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0),
                               _mm512_castps128_ps512(both));
}

struct Q8_0Format {
  static constexpr int kPairs = 1;
  static constexpr bool kMins = false;
  static int64_t Groups(int64_t K) { return (K / 32 + 1) / 2; }
  using Group = BlockPair;
  static HWY_INLINE void Begin(const uint8_t* row, int64_t K, int64_t g, Group& s) {
    s.b0 = row + 2 * g * kQ8_0Bytes;
    s.second = 2 * g + 1 < K / 32;
  }
  static HWY_INLINE void Pair(const Group& s, int, __m512i& codes, __m512& scale) {
    const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s.b0 + 2));
    const __m256i hi = s.second ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s.b0 + kQ8_0Bytes + 2))
                                : _mm256_set1_epi8(static_cast<char>(0x80));
    codes = _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1),
                             _mm512_set1_epi8(static_cast<char>(0x80)));
    scale = PairScales(s, kQ8_0Bytes);
  }
};

struct Q4_0Format {
  static constexpr int kPairs = 1;
  static constexpr bool kMins = false;
  static int64_t Groups(int64_t K) { return (K / 32 + 1) / 2; }
  using Group = BlockPair;
  static HWY_INLINE void Begin(const uint8_t* row, int64_t K, int64_t g, Group& s) {
    s.b0 = row + 2 * g * kQ4_0Bytes;
    s.second = 2 * g + 1 < K / 32;
  }
  static HWY_INLINE void Pair(const Group& s, int, __m512i& codes, __m512& scale) {
    const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s.b0 + 2));
    const __m128i hi = s.second ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(s.b0 + kQ4_0Bytes + 2))
                                : _mm_setzero_si128();
    // 128-bit lanes [lo, lo, hi, hi], then low nibbles in lanes 0 and 2, high in 1 and 3.
    const __m512i both = _mm512_castsi256_si512(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1));
    const __m512i dup = _mm512_permutexvar_epi64(_mm512_set_epi64(3, 2, 3, 2, 1, 0, 1, 0), both);
    codes = _mm512_and_si512(_mm512_mask_blend_epi64(0xCC, dup, _mm512_srli_epi16(dup, 4)), Nibbles());
    scale = PairScales(s, kQ4_0Bytes);
  }
};

struct Q4_KFormat {
  static constexpr int kPairs = 4;
  static constexpr bool kMins = true;
  static int64_t Groups(int64_t K) { return K / 256; }
  struct Group {
    const uint8_t* b;
    __m512 scales;  // lanes 0..7: d * sc_j
    __m512 mins;    // lanes 0..7: dmin * m_j, upper lanes 0
  };
  static HWY_INLINE void Begin(const uint8_t* row, int64_t, int64_t g, Group& s) {
    s.b = row + g * kQ4_KBytes;
    // The 12 packed bytes as words w0..w2: sc[0..3] = w0 & 63, m[0..3] = w1 & 63 (per byte),
    // sc[4..7] = w2 low nibbles | w0 top bits << 4, m[4..7] = w2 high nibbles | w1 top bits << 4.
    uint32_t w[3];
    __builtin_memcpy(w, s.b + kQ4_KScales, 12);
    const uint64_t sc = (w[0] & 0x3f3f3f3fu) |
                        uint64_t{(w[2] & 0x0f0f0f0fu) | (((w[0] >> 6) & 0x03030303u) << 4)} << 32;
    const uint64_t m = (w[1] & 0x3f3f3f3fu) |
                       uint64_t{((w[2] >> 4) & 0x0f0f0f0fu) | (((w[1] >> 6) & 0x03030303u) << 4)} << 32;
    uint16_t hd, hm;
    __builtin_memcpy(&hd, s.b, 2);
    __builtin_memcpy(&hm, s.b + 2, 2);
    const __m512 sc_f = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<int64_t>(sc))));
    const __m512 m_f = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<int64_t>(m))));
    s.scales = _mm512_mul_ps(_mm512_set1_ps(_cvtsh_ss(hd)), sc_f);
    s.mins = _mm512_mul_ps(_mm512_set1_ps(_cvtsh_ss(hm)), m_f);
  }
  static HWY_INLINE void Pair(const Group& s, int p, __m512i& codes, __m512& scale) {
    const __m512i v = _mm512_broadcast_i64x4(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s.b + kQ4_KQs + 32 * p)));
    codes = _mm512_and_si512(_mm512_mask_blend_epi64(0xF0, v, _mm512_srli_epi16(v, 4)), Nibbles());
    scale = _mm512_permutexvar_ps(PairScaleIndex(kQ4_KIndex, p), s.scales);
  }
};

struct Q6_KFormat {
  static constexpr int kPairs = 4;
  static constexpr bool kMins = false;
  static int64_t Groups(int64_t K) { return K / 256; }
  struct Group {
    const uint8_t* b;
    __m512 scales;  // d * sc_g for the 16 groups of 16
  };
  static HWY_INLINE void Begin(const uint8_t* row, int64_t, int64_t g, Group& s) {
    s.b = row + g * kQ6_KBytes;
    uint16_t hd;
    __builtin_memcpy(&hd, s.b + kQ6_KD, 2);
    const __m512i sc = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s.b + kQ6_KScales)));
    s.scales = _mm512_mul_ps(_mm512_set1_ps(_cvtsh_ss(hd)), _mm512_cvtepi32_ps(sc));
  }
  static HWY_INLINE void Pair(const Group& s, int p, __m512i& codes, __m512& scale) {
    const int half = p / 2;
    const __m512i ql = _mm512_loadu_si512(s.b + 64 * half);
    const __m512i qh = _mm512_broadcast_i64x4(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s.b + kQ6_KQh + 32 * half)));
    // Pair 2h: low nibbles, qh bits 0-1 (bytes 0..31) and 2-3 (32..63); pair 2h+1: high
    // nibbles, qh bits 4-5 and 6-7.
    const __m512i low = p % 2 == 0 ? ql : _mm512_srli_epi16(ql, 4);
    const __m512i shift = p % 2 == 0 ? _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1)
                                     : _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(6), 1);
    const __m512i high = _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh, shift), _mm512_set1_epi8(3)), 4);
    codes = _mm512_or_si512(_mm512_and_si512(low, Nibbles()), high);
    scale = _mm512_permutexvar_ps(PairScaleIndex(kQ6_KIndex, p), s.scales);
  }
};

// y[r, c] for R x rows starting at m and C weight rows starting at n.
template <class F, int R, int C>
HWY_NOINLINE void QuantTile(const QuantizedRows& xq, int64_t m, const WeightRef& w, int64_t n,
                            float* y, int64_t y_stride) {
  __m512 acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
  const int64_t K = w.cols, lanes = xq.k_pad / 4, blocks = xq.k_pad / 32;
  const int64_t groups = F::Groups(K);
  for (int64_t g = 0; g < groups; ++g) {
    typename F::Group grp[C];
    for (int c = 0; c < C; ++c) F::Begin(w.Row(n + c), K, g, grp[c]);
    for (int p = 0; p < F::kPairs; ++p) {
      __m512i codes[C];
      __m512 scale[C];
      for (int c = 0; c < C; ++c) F::Pair(grp[c], p, codes[c], scale[c]);
      const int64_t pair = g * F::kPairs + p;
      for (int r = 0; r < R; ++r) {
        const __m512i x = _mm512_loadu_si512(xq.Codes(m + r) + 64 * pair);
        const __m512 xs = _mm512_loadu_ps(xq.lane_scale.data() + (m + r) * lanes + 16 * pair);
        const __m512i init = _mm512_loadu_si512(xq.lane_init.data() + (m + r) * lanes + 16 * pair);
        for (int c = 0; c < C; ++c) {
          const __m512i sum = _mm512_dpbusd_epi32(init, codes[c], x);
          acc[r][c] = _mm512_fmadd_ps(_mm512_mul_ps(scale[c], xs), _mm512_cvtepi32_ps(sum), acc[r][c]);
        }
      }
    }
    if constexpr (F::kMins) {
      for (int r = 0; r < R; ++r) {
        const __m512 bsum = _mm512_maskz_loadu_ps(0xFF, xq.block_sum.data() + (m + r) * blocks + 8 * g);
        for (int c = 0; c < C; ++c) acc[r][c] = _mm512_fnmadd_ps(grp[c].mins, bsum, acc[r][c]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) y[r * y_stride + c] = _mm512_reduce_add_ps(acc[r][c]);
}

template <class F, int R>
HWY_INLINE void QuantTileCols(int C, const QuantizedRows& xq, int64_t m, const WeightRef& w,
                              int64_t n, float* y, int64_t y_stride) {
  switch (C) {
    case 4: return QuantTile<F, R, 4>(xq, m, w, n, y, y_stride);
    case 3: return QuantTile<F, R, 3>(xq, m, w, n, y, y_stride);
    case 2: return QuantTile<F, R, 2>(xq, m, w, n, y, y_stride);
    default: return QuantTile<F, R, 1>(xq, m, w, n, y, y_stride);
  }
}

template <class F>
void Avx3Columns(const QuantizedRows& xq, const WeightRef& w, int64_t n_begin, int64_t n_end,
                 float* y) {
  const int64_t M = xq.rows, Nout = w.rows;
  for (int64_t m0 = 0; m0 < M; m0 += kQRowBlock) {
    const int64_t m_end = std::min(M, m0 + kQRowBlock);
    for (int64_t n = n_begin; n < n_end; n += kQColTile) {
      const int C = static_cast<int>(std::min(kQColTile, n_end - n));
      for (int64_t m = m0; m < m_end; m += kQRowTile) {
        float* yt = y + m * Nout + n;
        switch (std::min(kQRowTile, m_end - m)) {
          case 4: QuantTileCols<F, 4>(C, xq, m, w, n, yt, Nout); break;
          case 3: QuantTileCols<F, 3>(C, xq, m, w, n, yt, Nout); break;
          case 2: QuantTileCols<F, 2>(C, xq, m, w, n, yt, Nout); break;
          default: QuantTileCols<F, 1>(C, xq, m, w, n, yt, Nout); break;
        }
      }
    }
  }
}
#endif  // HWY_TARGET == HWY_AVX3_DL

void Columns(const QuantizedRows& xq, const WeightRef& w, int64_t n_begin, int64_t n_end, float* y) {
#if HWY_TARGET == HWY_AVX3_DL
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

void MatMulQuantImpl(const float* x, int64_t M, const WeightRef& w, const float* bias, float* y,
                     QuantizedRows& xq, ThreadPool& pool) {
  QuantizeActivations(x, M, w.cols, CodeOffset(w.dtype), xq);
  const int64_t Nout = w.rows;
  ForColumnTasks(xq.rows, Nout, kQColTile, bias, y, pool,
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
  HWY_DYNAMIC_DISPATCH(MatMulQuantImpl)(x, M, w, bias, y, xq, pool);
}
}  // namespace dflash::ops
#endif
