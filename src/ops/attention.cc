// Scaled dot-product attention with per-row key ranges and an online softmax, over an f32,
// f16 or bf16 KV cache.
//
// One task = one KV head x a block of query rows. Keys are walked in tiles of kKvTile
// positions aligned to absolute multiples of kKvTile. A tile's keys are read dim-major (element
// i of its 32 keys side by side), so a score vector holds the dot products of kLanes keys and
// every step is one FMA per key vector and query head, with no horizontal reduction: a target's
// cache stores keys that way (KvView::tiled); keys stored as rows are transposed into a
// scratch tile first. Before, keys were rows and each score a fold of per-key partial sums:
// Qwen3-0.6B decode with Q4_K weights (`dflash bench --roofline`, EPYC, 2 threads) took 38-46
// ms per token at 4k context and 113-158 at 16k, now 24.9-26.5 and 67-69
// (bench/results/2026-12-04-epyc-d). For several rows, a tile's keys and values are widened to
// f32 once per task, into scratch tiles that stay in L1, and every query row and every query
// head of the GQA group that reads this KV head is updated from them: a 16-row verify streams
// the KV cache once, not 16 times. One row reads a tiled key cache in place, widening in registers. Either
// way each value reaches the arithmetic as the same f32. Scores go up to four (row, head)
// pairs at a time and value sums two heads of a row at a time where the group is even, so
// each widened key or value vector feeds several FMAs.
//
// bf16 caches on CPUs with AVX512_BF16 (by default AMD's; ops.h: Bf16DotActive) take a third
// path: each vdpbf16ps multiplies pairs of bf16 into 16 f32 sums, twice the
// multiply-adds of an f32 FMA, and reads the cache as it lies, with nothing widened. The tiled
// cache pairs what one instruction multiplies (ops.h: TiledKeyOffset, TiledValueOffset); the
// query is rounded to bf16 once per call and each tile's softmax weights once, as a bf16
// transformers model rounds them, and the running sums add the rounded weights, so the output
// stays an exactly weighted mean of the values. Every row count and layout runs the same
// instructions on the same bits, so this path is batch-invariant as the f32 one is.
//
// Batch invariance: a (row, head) pair's result depends only on its query, its key range and
// the fixed tile grid, never on the other rows in the call or the cache's layout. Each score is
// one fixed reduction order over head_dim (kChains interleaved partial sums, then added); the
// softmax state (running max, running sums lane by lane, output accumulator) is updated tile by
// tile in ascending key order, and the sums' lanes are added in one fixed order at the end.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/attention.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"

#ifndef DFLASH_OPS_ATTENTION_ONCE
#define DFLASH_OPS_ATTENTION_ONCE
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "ops/cpu_features.h"
#include "ops/ops.h"
namespace dflash::ops {
constexpr int64_t kQueryRowsPerTask = 16;

// Whether bf16 caches may take the bf16 dot path (see ops.h). By default on AMD only: on the
// Xeon (Sapphire Rapids) of 2026-12-06 vdpbf16ps attention measured slower than the f32 FMA
// path at every row count (README), while on Zen 5 it cut a 16-row pass at 4k keys by a third
// (attention 43%); Zen 4 has the instruction too but was not measured.
inline std::atomic<bool>& Bf16DotSwitch() {
  static std::atomic<bool> allowed{[] {
    const char* env = std::getenv("DFLASH_BF16_DOT");
    if (env && *env) return std::strcmp(env, "0") != 0;
    return static_cast<bool>(__builtin_cpu_is("amd"));
  }()};
  return allowed;
}

inline void CheckKvType(DType type, const char* what) {
  if (type != DType::kF32 && type != DType::kF16 && type != DType::kBF16)
    Fail(what, ": KV element type ", DTypeName(type), " is not f32, f16 or bf16");
}
}  // namespace dflash::ops
#endif

HWY_BEFORE_NAMESPACE();
#undef DFLASH_BF16_DOT  // defined again below for the one target that has the path
#undef DFLASH_BF16_ATTR
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

// Each lane's f32 bits rounded to bf16 (to nearest even, as F32ToBF16 rounds a number): the
// bf16 bits in the high half, zeros below, i.e. the rounded f32. NaNs are StoreKv's to keep.
template <class VU>
HWY_INLINE VU RoundedBf16Bits(VU u) {
  const hn::DFromV<VU> du;
  return hn::And(hn::Add(u, hn::Add(hn::Set(du, 0x7FFFu), hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1u)))),
                 hn::Set(du, 0xFFFF0000u));
}

// A vector of finite floats rounded to bf16: stored into bits as bf16, returned as f32.
HWY_INLINE VF RoundToBf16(VF x, uint16_t* bits) {
  const DF d;
  const hn::RebindToUnsigned<DF> du;
  const hn::RebindToSigned<DF> di;
  const auto rounded = RoundedBf16Bits(hn::BitCast(du, x));
  const hn::Rebind<uint16_t, DF> d16;
  hn::StoreU(hn::DemoteTo(d16, hn::BitCast(di, hn::ShiftRight<16>(rounded))), d16, bits);
  return hn::BitCast(d, rounded);
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
      if (p16) w = RoundToBf16(w, p16[i] + j);  // the sum adds what the values are multiplied by
      hn::StoreU(w, d, s[i] + j);
      sum = hn::Add(sum, w);
    }
    hn::Store(sum, d, st.sum);
    st.max = new_max[i];
  }
}

void AttentionImpl(const float* q, int64_t M, int64_t q_stride, const AttentionShape& shape, const KvView& kv,
                   const int32_t* key_begin, const int32_t* key_end, float* out, int64_t out_stride,
                   ThreadPool& pool) {
  const int hd = shape.head_dim;
  const int hd_pad = (hd + kLanes - 1) / kLanes * kLanes;
  const int group = shape.n_heads / shape.n_kv_heads;
  const int64_t row_blocks = (M + kQueryRowsPerTask - 1) / kQueryRowsPerTask;
  const size_t elem = kv.type == DType::kF32 ? 4 : 2;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
#ifdef DFLASH_BF16_DOT
  const bool bf16_dot = kv.type == DType::kBF16 && CpuHasAvx512Bf16() && Bf16DotSwitch().load(std::memory_order_relaxed);
#else
  constexpr bool bf16_dot = false;
#endif
  pool.ParallelFor(shape.n_kv_heads * row_blocks, [&](int64_t task) {
    const int kvh = static_cast<int>(task / row_blocks);
    const int64_t m0 = (task % row_blocks) * kQueryRowsPerTask;
    const int64_t m1 = std::min(M, m0 + kQueryRowsPerTask);
    const int64_t pairs = (m1 - m0) * group;  // (row, head) pairs of this task
    // Per-thread scratch: grows to the largest task once, then never allocates again.
    thread_local std::vector<float> acc_buf, q_buf, k_tile, v_tile;
    thread_local std::vector<RowState> state_buf;
    thread_local std::vector<ActivePair> pass_buf;
    thread_local std::vector<uint16_t> q16_buf, k16_tile, v16_tile;  // the bf16 dot path's
    const size_t pair_floats = static_cast<size_t>(pairs) * hd_pad, tile_floats = static_cast<size_t>(kKvTile) * hd_pad;
    if (acc_buf.size() < pair_floats) acc_buf.resize(pair_floats), q_buf.resize(pair_floats);
    if (k_tile.size() < tile_floats) k_tile.resize(tile_floats), v_tile.resize(tile_floats);
    if (state_buf.size() < static_cast<size_t>(pairs)) state_buf.resize(pairs), pass_buf.resize(pairs);
    if (bf16_dot && q16_buf.size() < pair_floats) q16_buf.resize(pair_floats);
    if (bf16_dot && k16_tile.size() < tile_floats) k16_tile.resize(tile_floats), v16_tile.resize(tile_floats);
    float* acc = acc_buf.data();
    float* qp = q_buf.data();
    RowState* state = state_buf.data();
    std::fill(acc, acc + pair_floats, 0.0f);
    for (int64_t m = m0; m < m1; ++m) {
      for (int g = 0; g < group; ++g) {
        float* dst = qp + ((m - m0) * group + g) * hd_pad;
        std::memcpy(dst, q + m * q_stride + static_cast<int64_t>(kvh * group + g) * hd, hd * sizeof(float));
        std::fill(dst + hd, dst + hd_pad, 0.0f);
        if (!bf16_dot) continue;
        uint16_t* q16 = q16_buf.data() + ((m - m0) * group + g) * hd_pad;
        for (int i = 0; i < hd_pad; i += kLanes) RoundToBf16(hn::LoadU(DF(), dst + i), q16 + i);
      }
    }
    int32_t lo = std::numeric_limits<int32_t>::max(), hi = 0;
    for (int64_t m = m0; m < m1; ++m) {
      if (key_end[m] > key_begin[m]) {
        lo = std::min(lo, key_begin[m]);
        hi = std::max(hi, key_end[m]);
      }
    }
    for (int64_t p = 0; p < pairs; ++p) state[p] = {kNegInf, {}};

    const size_t head_offset = static_cast<size_t>(kvh) * (kv.head_stride ? kv.head_stride : hd) * elem;
    const auto* k_head = static_cast<const uint8_t*>(kv.k) + head_offset;
    const auto* v_head = static_cast<const uint8_t*>(kv.v) + head_offset;
    for (int64_t t0 = (lo / kKvTile) * kKvTile; t0 < hi; t0 += kKvTile) {
      const int rows = static_cast<int>(std::min<int64_t>(kKvTile, hi - t0));
      // The (row, head) pairs with keys in this tile are scored up to four at a time, so each
      // widened key vector feeds four FMAs (two rows' head pairs in a verify block); then their
      // softmax state, and their values two heads at a time where the group is even.
      int active = 0;
      for (int64_t m = m0; m < m1; ++m) {
        const int jb = static_cast<int>(std::max<int64_t>(key_begin[m], t0) - t0);
        const int je = static_cast<int>(std::min<int64_t>(key_end[m], t0 + kKvTile) - t0);
        if (jb >= je) continue;
        for (int g = 0; g < group; ++g) pass_buf[active++] = {static_cast<int>((m - m0) * group + g), jb, je};
      }
      // The active pairs scored up to four at a time, their softmax state stepped, their values
      // added two heads at a time where the group is even (pairs 2k and 2k + 1 are then one
      // row's heads). score<H>(pairs, s) and accumulate<H>(pairs, rescale, s, p16) are a path's
      // kernels; round_bf16 rounds the weights into p16 for the bf16 dot path.
      const auto update_pairs = [&](const auto& score, const auto& accumulate, bool round_bf16) {
        for (int p0 = 0; p0 < active; p0 += kScorePairs) {
          const int count = std::min(kScorePairs, active - p0);
          const ActivePair* pass = pass_buf.data() + p0;
          alignas(64) float s[kScorePairs][kKvTile];
          alignas(64) uint16_t p16[kScorePairs][kKvTile];
          int first = 0;
          if constexpr (kScorePairs == 4) {
            if (count == 4) score.template operator()<4>(pass, s), first = 4;
          }
          for (; first + 2 <= count; first += 2) score.template operator()<2>(pass + first, s + first);
          if (first < count) score.template operator()<1>(pass + first, s + first);
          alignas(16) float rescale[4] = {0.0f, 0.0f, 0.0f, 0.0f};
          SoftmaxStep(s, count, pass, state, shape.scale, rescale, round_bf16 ? p16 : nullptr);
          const int step = group % 2 == 0 ? 2 : 1;
          for (int i = 0; i < count; i += step) {
            if (step == 2) {
              accumulate.template operator()<2>(pass + i, rescale + i, s + i, p16 + i);
            } else {
              accumulate.template operator()<1>(pass + i, rescale + i, s + i, p16 + i);
            }
          }
        }
      };
      using Scores = float (*)[kKvTile];
      using Weights16 = uint16_t (*)[kKvTile];
      const auto update = [&](auto kt, auto vt, int64_t v_stride) {
        const auto score = [&]<int H>(const ActivePair* pass, Scores s) {
          const float* qh[H];
          float* sh[H];
          for (int h = 0; h < H; ++h) qh[h] = qp + pass[h].pair * hd_pad, sh[h] = s[h];
          TileScores<H>(qh, kt, hd, sh);
        };
        const auto accumulate = [&]<int H>(const ActivePair* pass, const float* rescale, Scores s, Weights16) {
          float* acch[H];
          float rs[H];
          const float* ph[H];
          for (int h = 0; h < H; ++h) acch[h] = acc + pass[h].pair * hd_pad, rs[h] = rescale[h], ph[h] = s[h];
          AccumulateTile<H>(acch, rs, ph, vt, v_stride, pass[0].jb, pass[0].je, hd_pad);
        };
        update_pairs(score, accumulate, false);
      };
#ifdef DFLASH_BF16_DOT
      // The bf16 dot path (see the top of this file): bf16 pairs of queries, keys, weights and
      // values, read as 32-bit words.
      const auto update_bf16 = [&](const uint16_t* kt, const uint16_t* vt, int64_t pair_stride) {
        const auto words = [](const uint16_t* bf16) { return reinterpret_cast<const uint32_t*>(bf16); };
        const auto score = [&]<int H>(const ActivePair* pass, Scores s) {
          const uint32_t* qh[H];
          float* sh[H];
          for (int h = 0; h < H; ++h) qh[h] = words(q16_buf.data() + pass[h].pair * hd_pad), sh[h] = s[h];
          TileScoresBf16<H>(qh, kt, (hd + 1) / 2, sh);
        };
        const auto accumulate = [&]<int H>(const ActivePair* pass, const float* rescale, Scores, Weights16 p16) {
          float* acch[H];
          float rs[H];
          const uint32_t* ph[H];
          for (int h = 0; h < H; ++h) acch[h] = acc + pass[h].pair * hd_pad, rs[h] = rescale[h], ph[h] = words(p16[h]);
          AccumulateTileBf16<H>(acch, rs, ph, vt, pair_stride, pass[0].jb, pass[0].je, hd_pad);
        };
        update_pairs(score, accumulate, true);
      };
#endif
      // One row reads a tiled key cache in place, and a whole tile of values without padding
      // in place too, widened in registers (the same values, no copy). For several rows the
      // tile is widened once into the scratch tiles: that halves what the rows re-read for a
      // 16-bit cache, and in a cache whose positions are n_kv_heads * head_dim elements apart a
      // tile's rows in place would all fall into the same few L1 sets and be evicted before
      // the next row reads them. Keys stored as rows are always transposed into scratch.
      const uint8_t* v_rows = v_head + t0 * kv.stride * elem;
      WithKvElement(kv.type, [&](const auto* element) {
        using T = std::remove_const_t<std::remove_pointer_t<decltype(element)>>;
        const T* v_src = reinterpret_cast<const T*>(v_rows);
        if constexpr (std::is_same_v<T, hwy::bfloat16_t>) {
          // bf16 bits as bf16 dot products and the pair layout read them.
          const auto* k16 = reinterpret_cast<const uint16_t*>(k_head);
          const auto* v16 = reinterpret_cast<const uint16_t*>(v_head);
          if (kv.tiled) {
            const uint16_t* k_pairs = k16 + t0 * hd;  // tile t0 / kKvTile
            const uint16_t* v_pairs = v16 + t0 * hd;
#ifdef DFLASH_BF16_DOT
            if (bf16_dot) {
              if (hd == hd_pad) return update_bf16(k_pairs, v_pairs, 2 * hd);
              PadValuePairs(v_pairs, rows, hd, hd_pad, v16_tile.data());
              return update_bf16(k_pairs, v16_tile.data(), 2 * hd_pad);
            }
#endif
            if (m1 - m0 == 1) {  // as for other types: in place, widened in registers
              if (hd == hd_pad) return update(Bf16Pairs{k_pairs}, Bf16Pairs{v_pairs}, 2 * hd);
              WidenValuePairs(v_pairs, rows, hd, hd_pad, v_tile.data());
              return update(Bf16Pairs{k_pairs}, v_tile.data(), hd_pad);
            }
            WidenKeyPairs(k_pairs, hd, k_tile.data());
            WidenValuePairs(v_pairs, rows, hd, hd_pad, v_tile.data());
            return update(k_tile.data(), v_tile.data(), hd_pad);
          }
#ifdef DFLASH_BF16_DOT
          if (bf16_dot) {
            PairKeys(k16 + t0 * kv.stride, kv.stride, rows, hd, hd_pad, k16_tile.data());
            PairValues(v16 + t0 * kv.stride, kv.stride, rows, hd, hd_pad, v16_tile.data());
            return update_bf16(k16_tile.data(), v16_tile.data(), 2 * hd_pad);
          }
#endif
        }
        const bool one_row = m1 - m0 == 1;
        const float* kt = k_tile.data();
        const T* kt_in_place = nullptr;
        if (kv.tiled) {
          const T* k_src = reinterpret_cast<const T*>(k_head) + t0 * hd;  // tile t0 / kKvTile
          if (one_row) {
            kt_in_place = k_src;
          } else {
            WidenTile(k_src, hd, k_tile.data());
          }
        } else {
          // Keys at and past `hi` may not exist: the tile's keys for them stay zero and unread.
          TransposeKeys(reinterpret_cast<const T*>(k_head + t0 * kv.stride * elem), kv.stride, rows, hd, k_tile.data());
        }
        const bool v_in_place = one_row && hd_pad == hd && rows == kKvTile;
        if (!v_in_place) WidenRows(v_src, kv.stride, rows, hd, hd_pad, v_tile.data());
        if (kt_in_place && v_in_place) return update(kt_in_place, v_src, kv.stride);
        if (kt_in_place) return update(kt_in_place, v_tile.data(), hd_pad);
        if (v_in_place) return update(kt, v_src, kv.stride);
        update(kt, v_tile.data(), hd_pad);
      });
    }
    for (int64_t m = m0; m < m1; ++m) {
      for (int g = 0; g < group; ++g) {
        const int64_t pair = (m - m0) * group + g;
        float* o = out + m * out_stride + static_cast<int64_t>(kvh * group + g) * hd;
        const float sum = state[pair].Sum();
        const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
        for (int i = 0; i < hd; ++i) o[i] = acc[pair * hd_pad + i] * inv;
      }
    }
  });
}

// Whether this target has the bf16 dot path and the CPU the instructions for it.
bool HasBf16DotImpl() {
#ifdef DFLASH_BF16_DOT
  return CpuHasAvx512Bf16();
#else
  return false;
#endif
}

void StoreKvImpl(const float* x, int64_t n, DType type, void* out) {
  if (type == DType::kF32) {
    std::memcpy(out, x, n * sizeof(float));
  } else if (type == DType::kF16) {
    const DF d;
    const hn::Rebind<hwy::float16_t, DF> dh;
    auto* o = static_cast<hwy::float16_t*>(out);
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes) hn::StoreU(hn::DemoteTo(dh, hn::LoadU(d, x + i)), dh, o + i);
    auto* bits = static_cast<uint16_t*>(out);
    for (; i < n; ++i) bits[i] = F32ToF16(x[i]);
  } else {
    // F32ToBF16 on kLanes at a time: round to nearest even, NaNs kept quiet NaNs.
    const DF d;
    const hn::RebindToUnsigned<DF> du;
    const hn::RebindToSigned<DF> di;
    const hn::Rebind<uint16_t, DF> d16;
    const auto abs_mask = hn::Set(du, 0x7FFFFFFFu), quiet = hn::Set(du, 0x40u);
    const auto inf = hn::Set(di, 0x7F800000);
    auto* bits = static_cast<uint16_t*>(out);
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes) {
      const auto u = hn::BitCast(du, hn::LoadU(d, x + i));
      const auto high = hn::ShiftRight<16>(u);
      const auto rounded = hn::ShiftRight<16>(RoundedBf16Bits(u));
      const auto nan = hn::RebindMask(du, hn::Gt(hn::BitCast(di, hn::And(u, abs_mask)), inf));
      hn::StoreU(hn::DemoteTo(d16, hn::BitCast(di, hn::IfThenElse(nan, hn::Or(high, quiet), rounded))), d16, bits + i);
    }
    for (; i < n; ++i) bits[i] = F32ToBF16(x[i]);
  }
}

}  // namespace dflash::ops::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace dflash::ops {
HWY_EXPORT(AttentionImpl);
HWY_EXPORT(StoreKvImpl);
HWY_EXPORT(HasBf16DotImpl);

void Attention(const float* q, int64_t M, int64_t q_stride, const AttentionShape& shape, const KvView& kv,
               const int32_t* key_begin, const int32_t* key_end, float* out, int64_t out_stride,
               ThreadPool& pool) {
  if (shape.n_kv_heads <= 0 || shape.n_heads % shape.n_kv_heads != 0)
    Fail("Attention: ", shape.n_heads, " query heads do not group over ", shape.n_kv_heads,
         " key/value heads");
  if (shape.head_dim < 1) Fail("Attention: head_dim ", shape.head_dim, " must be positive");
  CheckKvType(kv.type, "Attention");
  const int64_t tile = int64_t{kKvTile} * shape.head_dim;
  if (kv.tiled && (kv.head_stride % tile != 0 || (shape.n_kv_heads > 1 && kv.head_stride == 0))) {
    Fail("Attention: a tiled cache needs a head stride that is a multiple of ", kKvTile, " x ", shape.head_dim,
         " elements, have ", kv.head_stride);
  }
  if (kv.tiled && kv.stride != shape.head_dim)
    Fail("Attention: a tiled cache's positions are head_dim (", shape.head_dim, ") apart, have ", kv.stride);
  if (kv.tiled && kv.type == DType::kBF16 && shape.head_dim % 2 != 0)
    Fail("Attention: a tiled bf16 cache pairs dims, head_dim ", shape.head_dim, " is odd");
  HWY_DYNAMIC_DISPATCH(AttentionImpl)(q, M, q_stride, shape, kv, key_begin, key_end, out, out_stride, pool);
}

void Attention(const float* q, int64_t M, int64_t q_stride, const AttentionShape& shape,
               const float* k, const float* v, int64_t kv_stride, const int32_t* key_begin,
               const int32_t* key_end, float* out, int64_t out_stride, ThreadPool& pool) {
  Attention(q, M, q_stride, shape, KvView{k, v, kv_stride, DType::kF32}, key_begin, key_end, out, out_stride, pool);
}

void StoreKv(const float* x, int64_t n, DType type, void* out) {
  CheckKvType(type, "StoreKv");
  HWY_DYNAMIC_DISPATCH(StoreKvImpl)(x, n, type, out);
}

namespace {
// One position's head_dim values rounded as StoreKv rounds them, each placed at offset(i).
template <class Offset>
void StoreTiled(const float* x, int head_dim, DType type, void* head, const char* what, const Offset& offset) {
  CheckKvType(type, what);
  if (head_dim > 512) Fail(what, ": head_dim ", head_dim, " is over 512");
  if (type == DType::kBF16 && head_dim % 2 != 0) Fail(what, ": a tiled bf16 cache pairs dims, head_dim ", head_dim, " is odd");
  // Typed element copies: a memcpy of a run-time size per element made storing a 16-row
  // verify's keys and values a millisecond of the pass.
  if (type == DType::kF32) {
    for (int i = 0; i < head_dim; ++i) static_cast<float*>(head)[offset(i)] = x[i];
    return;
  }
  alignas(64) uint16_t rounded[512];
  StoreKv(x, head_dim, type, rounded);
  for (int i = 0; i < head_dim; ++i) static_cast<uint16_t*>(head)[offset(i)] = rounded[i];
}
}  // namespace

void StoreKeyTiled(const float* x, int head_dim, DType type, int64_t p, void* head) {
  StoreTiled(x, head_dim, type, head, "StoreKeyTiled", [&](int i) { return TiledKeyOffset(p, i, head_dim, type); });
}

void StoreValueTiled(const float* x, int head_dim, DType type, int64_t p, void* head) {
  StoreTiled(x, head_dim, type, head, "StoreValueTiled", [&](int i) { return TiledValueOffset(p, i, head_dim, type); });
}

bool Bf16DotAllowed() { return Bf16DotSwitch().load(std::memory_order_relaxed); }
bool Bf16DotActive() { return Bf16DotAllowed() && HWY_DYNAMIC_DISPATCH(HasBf16DotImpl)(); }
void SetBf16DotAllowed(bool allowed) { Bf16DotSwitch().store(allowed, std::memory_order_relaxed); }
}  // namespace dflash::ops
#endif
