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
// output columns per vector: lane c of a code vector holds 4 codes of column c, and one
// vpdpbusd against 4 broadcast activation codes advances all 16 columns. Weights are stored
// that way at load (ops/weight_pack.h), so a block is a few contiguous loads, with no
// transpose or gather at run time. The code vectors then serve up to 16
// activation rows, so a 16-row verify reads and unpacks each weight block once (the decode
// shape, one row, is bound by memory either way). Other targets run a portable scalar path.
//
// AMX (ops/amx.h): with 12 or more rows, Q8_0 and Q4_K use int8 tile dot products instead: the
// packed weights of a block are the B operand as they lie in memory, 16 activation rows the A
// operand, and one instruction computes the block's 16 x 16 integer sums; each output element
// then gets exactly Step()'s f32 operations (ScaleBlock), so the two paths agree bit for bit.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/matmul_quant.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"

#ifndef DFLASH_OPS_MATMUL_QUANT_ONCE
#define DFLASH_OPS_MATMUL_QUANT_ONCE
#include <cpuid.h>

#include <algorithm>
#include <bit>
#include <vector>

#include "core/error.h"
#include "ops/amx.h"
#include "ops/column_tasks.h"
#include "ops/matmul_quant.h"
#include "ops/quant_activations.h"
#include "ops/quant_blocks.h"
#include "ops/weight_pack.h"
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

// Formats with a tile kernel, and the fewest rows for which it beats VNNI. A tile block costs
// the same for 1 or 16 rows; on the 2-vCPU Xeon this was tuned on, 1024x3072, 1 thread
// (bench/matmul_bench.cc): 8 rows 650-740 us tiles vs 420-500 VNNI, 16 rows 690-710 vs 750-1000.
inline bool HasAmxKernel(DType t) { return t == DType::kQ8_0 || t == DType::kQ4_K; }
constexpr int64_t kAmxMinRows = 12;
// The CPU's family as CPUID reports it (base family plus extended family).
inline unsigned CpuFamily() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return 0;
  const unsigned base = (eax >> 8) & 0xF;
  return base == 0xF ? base + ((eax >> 20) & 0xFF) : base;
}
// Whether one activation row asks for weight lines ahead as several rows do (see GroupRows):
// on Intel and on AMD from family 26 (Zen 5), where it measured faster; the EPYC of 2026-12-04,
// whose family went unrecorded, measured it slower, so earlier AMD families do not ask.
inline bool PrefetchOneRow() {
  static const bool ask = __builtin_cpu_is("intel") || (__builtin_cpu_is("amd") && CpuFamily() >= 26);
  return ask;
}
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

// Lane i of the result reduces (op) all lanes of v[i], for Lanes(d) vectors at once: each level
// halves the partials per vector and doubles the vectors per register (ConcatEven/ConcatOdd),
// about 3 instructions per vector in all, where a horizontal reduction of each vector alone is
// a latency chain of 8. Clobbers v.
template <class D, class V, class Op>
V ReduceEach(D d, V* v, Op op) {
#if HWY_TARGET != HWY_SCALAR  // one lane: v[0] is its own reduction
  for (size_t n = hn::Lanes(d); n > 1; n /= 2) {
    for (size_t i = 0; i < n / 2; ++i) {
      v[i] = op(hn::ConcatEven(d, v[2 * i + 1], v[2 * i]), hn::ConcatOdd(d, v[2 * i + 1], v[2 * i]));
    }
  }
#else
  (void)d, (void)op;
#endif
  return v[0];
}

// Blocks [b_begin, b_end) of row r of x quantised into `out` (see quant_activations.h), Lanes
// blocks at a time so that the four per-block reductions (max |x|, sum of x, the two 16-code
// sums) run as trees.
void QuantizeBlocks(const float* x, int64_t r, int64_t b_begin, int64_t b_end, int offset, QuantizedRows& out) {
  const hn::CappedTag<float, 16> df;
  const hn::RebindToSigned<decltype(df)> di;
  const hn::Rebind<int8_t, decltype(df)> d8;
  using VF = hn::Vec<decltype(df)>;
  using VI = hn::Vec<decltype(di)>;
  constexpr int64_t kMaxLanes = 16;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const auto lo = hn::Set(di, -127), hi = hn::Set(di, 127);
  const int64_t base = out.Base(r), base16 = out.Base16(r), group = out.group();
  const float* xr = x + r * out.k;
  for (int64_t b0 = b_begin; b0 < b_end; b0 += N) {
    const int64_t nb = std::min(N, b_end - b0);
    VF amax[kMaxLanes], sum[kMaxLanes];
    for (int64_t b = 0; b < N; ++b) {
      if (b >= nb) {
        amax[b] = sum[b] = hn::Zero(df);
        continue;
      }
      const float* xb = xr + 32 * (b0 + b);
      amax[b] = hn::Abs(hn::LoadU(df, xb));
      sum[b] = hn::LoadU(df, xb);
      for (int64_t j = N; j < 32; j += N) {
        const auto v = hn::LoadU(df, xb + j);
        amax[b] = hn::Max(amax[b], hn::Abs(v));
        sum[b] = hn::Add(sum[b], v);
      }
    }
    const VF d = hn::Div(ReduceEach(df, amax, [](VF a, VF b) { return hn::Max(a, b); }), hn::Set(df, 127.0f));
    const VF id = hn::IfThenZeroElse(hn::Eq(d, hn::Zero(df)), hn::Div(hn::Set(df, 1.0f), d));
    alignas(64) float scale[kMaxLanes], inverse[kMaxLanes], sums[kMaxLanes];
    hn::Store(d, df, scale);
    hn::Store(id, df, inverse);
    hn::Store(ReduceEach(df, sum, [](VF a, VF b) { return hn::Add(a, b); }), df, sums);
    VI half_sums[2 * kMaxLanes];  // per 16 codes, in the order 2 * b + half
    for (int64_t b = 0; b < N; ++b) {
      if (b >= nb) {
        half_sums[2 * b] = half_sums[2 * b + 1] = hn::Zero(di);
        continue;
      }
      const int64_t slot = base + (b0 + b) * group;
      const auto vid = hn::Set(df, inverse[b]);
      int8_t* codes = out.codes.data() + 32 * slot;
      for (int64_t j = 0; j < 32; j += N) {
        const auto q = hn::Min(hn::Max(hn::NearestInt(hn::Mul(hn::LoadU(df, xr + 32 * (b0 + b) + j), vid)), lo), hi);
        hn::StoreU(hn::DemoteTo(d8, q), d8, codes + j);
        VI& half = half_sums[2 * b + j / 16];  // N divides 16
        half = j % 16 == 0 ? q : hn::Add(half, q);
      }
      out.block_scale[slot] = scale[b];
      out.block_sum[slot] = sums[b];
    }
    alignas(64) int32_t code_sums[2 * kMaxLanes];
    const auto add = [](VI a, VI b) { return hn::Add(a, b); };
    hn::Store(ReduceEach(di, half_sums, add), di, code_sums);
    hn::Store(ReduceEach(di, half_sums + N, add), di, code_sums + N);
    for (int64_t b = 0; b < nb; ++b) {
      for (int h = 0; h < 2; ++h) out.init16[base16 + (2 * (b0 + b) + h) * group] = -offset * code_sums[2 * b + h];
      out.init32[base + (b0 + b) * group] = -offset * (code_sums[2 * b] + code_sums[2 * b + 1]);
    }
  }
}

// Quantises M rows of x (K wide, whole 32-element blocks) in groups of 16 rows, or of M rounded
// up to a power of two when fewer (quant_activations.h), spread over the pool (the weights' pass
// cannot start before it ends, so a serial quantisation idles the workers).
void QuantizeActivations(const float* x, int64_t M, int64_t K, int offset, QuantizedRows& out, ThreadPool& pool) {
  out.rows = M;
  out.k = K;
  out.blocks = K / 32;
  out.group_shift = std::countr_zero(std::bit_ceil(static_cast<uint64_t>(std::min(M, kQRowTile))));
  const int64_t padded = out.padded_rows(), slots = padded * out.blocks;
  out.codes.resize(32 * slots);
  out.init16.resize(2 * slots);
  out.init32.resize(slots);
  out.block_scale.resize(slots);
  out.block_sum.resize(slots);
  // The padding rows: zero whatever an earlier call left there.
  for (int64_t r = M; r < padded; ++r) {
    for (int64_t b = 0; b < out.blocks; ++b) {
      const int64_t slot = out.Base(r) + b * out.group();
      std::fill_n(out.codes.data() + 32 * slot, 32, int8_t{0});
      for (int h = 0; h < 2; ++h) out.init16[out.Base16(r) + (2 * b + h) * out.group()] = 0;
      out.init32[slot] = 0;
      out.block_scale[slot] = out.block_sum[slot] = 0.0f;
    }
  }
  // A task takes 16 blocks of all of one group's rows. The per-block arrays keep a group's rows
  // side by side, so tasks of whole rows wrote the same cache lines from two threads: with the
  // model's row-local work also split over the pool, quantising took 3x the samples it takes
  // alone. One row stays one task.
  constexpr int64_t kBlocksPerTask = 16;
  const int64_t chunk = M == 1 ? out.blocks : kBlocksPerTask;
  const int64_t chunks = (out.blocks + chunk - 1) / chunk;
  pool.ParallelFor((padded >> out.group_shift) * chunks, [&](int64_t task) {
    const int64_t first_row = task / chunks << out.group_shift;
    const int64_t b0 = task % chunks * chunk, b1 = std::min(out.blocks, b0 + chunk);
    for (int64_t r = first_row; r < std::min(M, first_row + out.group()); ++r) QuantizeBlocks(x, r, b0, b1, offset, out);
  });
}

// ------------------------------------------------------------------------------------------
// Portable path: decode one weight row into signed codes with a scale per 16 elements (and
// Q4_K's mins per 32), then exact integer sums per 16 elements for every x row.
struct DecodedRow {
  std::vector<int8_t> codes;  // [K] code - offset
  std::vector<float> scale;   // [K/16]
  std::vector<float> mins;    // [K/32] Q4_K: dmin * m, else empty
  std::vector<uint8_t> row_bytes;  // a packed weight's row, unpacked
};

void DecodeRow(const WeightRef& w, int64_t n, DecodedRow& out) {
  const int64_t K = w.cols;
  const uint8_t* row = nullptr;
  if (w.layout == WeightLayout::kGroups16) {
    out.row_bytes.resize(w.row_bytes);
    UnpackRow(w, n, out.row_bytes.data());
    row = out.row_bytes.data();
  } else {
    row = w.Row(n);
  }
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
  const QuantizedRun x = xq.Run(m);
  float acc = 0.0f;
  for (int64_t g = 0; g < xq.k / 16; ++g) {
    const int8_t* q = x.Codes(16 * g);
    int32_t sum = 0;
    for (int j = 0; j < 16; ++j) sum += int32_t{wr.codes[16 * g + j]} * q[j];
    acc += wr.scale[g] * *x.BlockScale(16 * g) * static_cast<float>(sum);
    if (!wr.mins.empty() && g % 2 == 1) acc -= wr.mins[g / 2] * *x.BlockSum(16 * g);
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
// AVX3_DL path: 16 output columns per vector. A format produces, per block of a 16-column
// group, code vectors whose lane c holds 4 consecutive codes of column c, and the per-column
// scales; Step() then runs them against up to 16 activation rows.

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

// ------------------------------------------------------------------------------------------
// AMX path. One tile dot product computes C[r][n] = sum_k A[r][k] * B[k/4][n][k%4], the 16 x 16
// integer sums of one 32-element block: A is 16 activation rows' codes (one group's block, 32
// bytes per row), B the block's packed weight codes, whose 8 vectors of 16 columns x 4 codes are
// exactly the B layout (Q8_0: in place; Q4_K: once its nibbles are split). Row r of C is the
// block's sums for y[r, the 16 columns], which ScaleBlock adds as Step() would.

// The tile intrinsics are asm statements that do not tell the compiler which memory they read
// or write; this orders the buffers written before a tile load, and the reads of a stored C
// tile, against them.
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

// One block of the tile path: its B operand and the 16 columns' scales (and Q4_K's mins), then
// the C tile the dot product leaves.
struct TileStep {
  const uint8_t* b;
  alignas(64) uint8_t b_buf[512];  // B when it must be unpacked
  __m512 wscale, wmin;
  alignas(64) int32_t c[kQRowTile * kQCols];
};

// C = A · B for block s of the 16 rows of run x, in tile set S (tiles 3S .. 3S + 2), stored to st.c.
// Two sets let the tile unit start a block while the previous one is being stored. The tile
// intrinsics paste their register numbers into asm text, so each set is spelled out. A is
// signed (activation codes), B unsigned (weight codes): TDPBSUD.
#define DFLASH_TILE_DOT(A, B, C)                            \
  _tile_loadd(A, x.Codes(32 * s), 32);                      \
  _tile_loadd(B, st.b, 64);                                 \
  _tile_zero(C);                                            \
  _tile_dpbsud(C, A, B);                                    \
  _tile_stored(C, st.c, 64)

template <int S>
HWY_INLINE void TileDot(const QuantizedRun& x, int64_t s, TileStep& st) {
  MemoryBarrier();
  if constexpr (S == 0) {
    DFLASH_TILE_DOT(0, 1, 2);
  } else {
    DFLASH_TILE_DOT(3, 4, 5);
  }
}
#undef DFLASH_TILE_DOT

// acc[r] += block s of row r of run x, for all 16 rows of the tile (QuantizedRows pads to them).
template <class F>
HWY_INLINE void TileScale(const QuantizedRun& x, int64_t s, const TileStep& st,
                          __m512 (&acc)[kQRowTile]) {
  MemoryBarrier();
  const int32_t* init = CodeInit<8>(x, 32 * s);
  const float* dx = x.BlockScale(32 * s);
  const float* bsum = x.BlockSum(32 * s);
#pragma GCC unroll 16
  for (int r = 0; r < kQRowTile; ++r) {
    __m512i isum = _mm512_load_si512(st.c + kQCols * r);
    if (F::kInit) isum = _mm512_add_epi32(isum, _mm512_set1_epi32(init[r]));
    ScaleBlock<F::kMin>(isum, st.wscale, st.wmin, dx[r], bsum[r], acc[r]);
  }
}

// Tile formats: Prepare(s, st) sets block s's B operand and scales; Prefetch(s) fetches block
// s's weights. A tile load waits for all its lines and the hardware prefetcher does not follow
// tile loads, so without prefetching every block would wait for memory.
class Q8_0Amx {
 public:
  static constexpr bool kInit = true, kMin = false;
  static constexpr int64_t kVectors = Q8_0Format::kVectors;
  static constexpr int64_t kAhead = 8;  // blocks, ~4 KB
  explicit Q8_0Amx(const PackedColumns& g) : g_(g) {}
  HWY_INLINE void Prefetch(int64_t s) const {
    if (s >= g_.blocks) return;
    g_.Prefetch(s);
    if (s % 2 == 0) PrefetchLine(g_.VectorPtr(0, 0) + 64 * kVectors * g_.blocks + 32 * s);  // two blocks' f16 per line
  }
  HWY_INLINE void Prepare(int64_t s, TileStep& st) const {
    st.b = g_.VectorPtr(s, 0);
    st.wscale = g_.F16(s);
    st.wmin = _mm512_setzero_ps();
  }

 private:
  const PackedColumns& g_;
};

// Blocks are sub-blocks: 8 per 256-element super-block, whose scales are decoded at its first.
class Q4_KAmx {
 public:
  static constexpr bool kInit = false, kMin = true;
  static constexpr int64_t kVectors = Q4_KFormat::kVectors;
  static constexpr int64_t kAhead = 16;  // sub-blocks, ~4.5 KB
  explicit Q4_KAmx(const PackedColumns& g) : g_(g) {}
  // Sub-block s fetches its eighth of its super-block's lines.
  HWY_INLINE void Prefetch(int64_t s) const {
    if (s >= 8 * g_.blocks) return;
    g_.Prefetch(s / 8, s % 8, 8);
  }
  HWY_INLINE void Prepare(int64_t s, TileStep& st) {
    const int64_t sb = s / 8;
    const int j = static_cast<int>(s % 8);
    if (j == 0) {
      const Q4KScales scales(g_, sb);
      for (int i = 0; i < 8; ++i) wscale_[i] = scales.Scale(i), wmin_[i] = scales.Min(i);
    }
    st.wscale = wscale_[j];
    st.wmin = wmin_[j];
    // Sub-block j: the low (j even) or high nibbles of chunk j / 2.
    for (int i = 0; i < 8; ++i) {
      __m512i v = g_.Vector(sb, Q4_KFormat::Qs(j / 2, i));
      if (j % 2) v = _mm512_srli_epi16(v, 4);
      _mm512_store_si512(st.b_buf + 64 * i, _mm512_and_si512(v, Nibbles()));
    }
    st.b = st.b_buf;
  }

 private:
  const PackedColumns& g_;
  __m512 wscale_[8], wmin_[8];
};

// acc[r] = y[row r of run x, the group's columns] over all blocks, in block order. A tile store reaches
// vector loads only once it has retired, so block s + kDepth's dot product is issued before
// block s is scaled; tile sets alternate between blocks.
template <class F>
HWY_INLINE void TileRows(F& format, const QuantizedRun& x, int64_t steps, __m512 (&acc)[kQRowTile]) {
  constexpr int64_t kDepth = 4;
  TileStep st[kDepth];
  const auto issue = [&](int64_t s) {
    if (s >= steps) return;
    TileStep& d = st[s % kDepth];
    format.Prefetch(s + F::kAhead);
    format.Prepare(s, d);
    if (s % 2 == 0) {
      TileDot<0>(x, s, d);
    } else {
      TileDot<1>(x, s, d);
    }
  };
  for (int64_t s = 0; s < kDepth; ++s) issue(s);
  for (int64_t s = 0; s < steps; ++s) {
    TileScale<F>(x, s, st[s % kDepth], acc);
    issue(s + kDepth);
  }
}

template <class F>
void AmxColumns(const QuantizedRows& xq, const WeightRef& w, int64_t n_begin, int64_t n_end, float* y) {
  HWY_DASSERT(xq.group() == kQRowTile);  // kAmxMinRows rows or more make whole groups of 16
  ConfigureTiles();
  const int64_t Nout = w.rows;
  for (int64_t n = n_begin; n < n_end; n += kQCols) {
    const PackedColumns g = MakeGroup(w, F::kVectors, n, n_end);
    const __mmask16 mask = static_cast<__mmask16>((1u << g.count) - 1);
    F format(g);
    for (int64_t m0 = 0; m0 < xq.rows; m0 += kQRowTile) {
      __m512 acc[kQRowTile];
      for (__m512& a : acc) a = _mm512_setzero_ps();
      TileRows(format, xq.Run(m0), w.cols / 32, acc);
      const int64_t rows = std::min(kQRowTile, xq.rows - m0);
      for (int64_t r = 0; r < rows; ++r) _mm512_mask_storeu_ps(y + (m0 + r) * Nout + n, mask, acc[r]);
    }
  }
}
#endif  // HWY_TARGET == HWY_AVX3_DL

void Columns(const QuantizedRows& xq, const WeightRef& w, int64_t n_begin, int64_t n_end, float* y, bool amx) {
#if HWY_TARGET == HWY_AVX3_DL
  if (amx) {
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
#else
  (void)amx;
#endif
  PortableColumns(xq, w, n_begin, n_end, y);
}

// Bit s of amx_mask: output s uses the tile kernel (the caller checked the CPU and the format).
// The outputs' code offsets agree wherever they use one (MatMulQuantized checks).
void MatMulQuantImpl(const float* x, int64_t M, const MatMulOutput* outputs, int count, uint32_t amx_mask,
                     QuantizedRows& xq, ThreadPool& pool) {
  int offset = 0;
  ColumnSegment segments[kMaxSegments];
  for (int s = 0; s < count; ++s) {
    offset = std::max(offset, CodeOffset(outputs[s].w->dtype));
    segments[s] = {outputs[s].w->rows, outputs[s].bias, outputs[s].y};
  }
  QuantizeActivations(x, M, outputs[0].w->cols, offset, xq, pool);
  ForColumnTasks(M, std::span<const ColumnSegment>(segments, count), kQCols, pool,
                 [&](int s, int64_t n_begin, int64_t n_end) {
                   Columns(xq, *outputs[s].w, n_begin, n_end, outputs[s].y, (amx_mask >> s) & 1);
                 });
}

}  // namespace dflash::ops::HWY_NAMESPACE
#if HWY_TARGET == HWY_AVX3_DL && HWY_COMPILER_CLANG
#pragma clang attribute pop
#endif
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace dflash::ops {
HWY_EXPORT(MatMulQuantImpl);

void MatMulQuantized(const float* x, int64_t M, std::span<const MatMulOutput> outputs, ThreadPool& pool) {
  if (outputs.empty()) return;
  int offset = 0;
  bool offsets_agree = true;
  uint32_t amx_mask = 0;
  for (size_t s = 0; s < outputs.size(); ++s) {
    const WeightRef& w = *outputs[s].w;
    if (!quant::IsBlockQuantized(w.dtype)) Fail("MatMulQuantized: dtype ", DTypeName(w.dtype), " is not block-quantised");
    if (w.cols % BlockElems(w.dtype) != 0 || w.row_bytes < RowBytes(w.dtype, w.cols)) {
      Fail("MatMul: ", DTypeName(w.dtype), " weight of ", w.cols, " columns needs whole blocks (",
           BlockElems(w.dtype), ") and ", RowBytes(w.dtype, w.cols), " bytes per row, has ", w.row_bytes);
    }
    if (w.layout != WeightLayout::kGroups16) {
      Fail("MatMul: ", DTypeName(w.dtype), " weights must be packed first (PackMatrices / ops::PackWeight)");
    }
    const int o = CodeOffset(w.dtype);
    if (o != 0 && offset != 0 && o != offset) offsets_agree = false;
    offset = std::max(offset, o);
    if (M >= kAmxMinRows && HasAmxKernel(w.dtype) && AmxActive()) amx_mask |= 1u << s;
  }
  // Codes quantised for one offset serve only weights of that offset (and Q4_K, which has none).
  if (!offsets_agree || outputs.size() > kMaxSegments) {
    for (const MatMulOutput& o : outputs) MatMulQuantized(x, M, std::span<const MatMulOutput>(&o, 1), pool);
    return;
  }
  // One quantised copy of x per calling thread, reused so decode allocates nothing.
  thread_local QuantizedRows xq;
  HWY_DYNAMIC_DISPATCH(MatMulQuantImpl)(x, M, outputs.data(), static_cast<int>(outputs.size()), amx_mask, xq, pool);
}
}  // namespace dflash::ops
#endif
