// Scaled dot-product attention with per-row key ranges and an online softmax, over an f32,
// f16 or bf16 KV cache.
//
// One task = one KV head x a block of query rows. Keys are walked in tiles of kKvTile
// positions aligned to absolute multiples of kKvTile. A tile's keys are read dim-major (element
// i of its 32 keys side by side), so a score vector holds the dot products of kLanes keys and
// every step is one FMA per key vector and query head, with no horizontal reduction: a target's
// cache stores keys that way (KvView::keys_tiled); keys stored as rows are transposed into a
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
// Batch invariance: a (row, head) pair's result depends only on its query, its key range and
// the fixed tile grid, never on the other rows in the call or the cache's layout. Each score is
// one fixed reduction order over head_dim (kChains interleaved partial sums, then added); the
// softmax state (running max, running sum, output accumulator) is updated tile by tile in
// ascending key order.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/attention.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"

#ifndef DFLASH_OPS_ATTENTION_ONCE
#define DFLASH_OPS_ATTENTION_ONCE
#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "ops/ops.h"
namespace dflash::ops {
constexpr int64_t kQueryRowsPerTask = 16;

inline void CheckKvType(DType type, const char* what) {
  if (type != DType::kF32 && type != DType::kF16 && type != DType::kBF16)
    Fail(what, ": KV element type ", DTypeName(type), " is not f32, f16 or bf16");
}
}  // namespace dflash::ops
#endif

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

// Partial sums per key vector over head_dim: fixed per target (never by how many heads or rows
// are computed together), enough independent FMA chains to hide the FMA latency.
constexpr int kChains = kLanes >= 16 ? 2 : 1;
constexpr int kKeyVectors = kKvTile / kLanes;

// s[h][j] = dot(q[h], key j) over dim floats for the kKvTile keys of a dim-major tile kt, for
// H (row, head) pairs that read the same keys: each widened key vector serves all H. Key j's
// dot product is chain c's sum over the dims i = c (mod kChains) in ascending order, the chains
// then added in order: one order for every H, row block and cache layout.
template <int H, class T>
HWY_INLINE void TileScores(const float* const (&q)[H], const T* kt, int dim, float* const (&s)[H]) {
  static_assert(H == 1 || H == 2 || H == 4, "pairs are scored one, two or four at a time");
  const DF d;
  VF acc[H][kKeyVectors][kChains];
  for (int h = 0; h < H; ++h)
    for (int v = 0; v < kKeyVectors; ++v)
      for (int c = 0; c < kChains; ++c) acc[h][v][c] = hn::Zero(d);
  const auto step = [&](int i, int c) HWY_ATTR {
    VF kv[kKeyVectors];
#pragma GCC unroll 32
    for (int v = 0; v < kKeyVectors; ++v) kv[v] = LoadF32(kt + static_cast<int64_t>(i) * kKvTile + v * kLanes);
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
template <int W, int H, class T>
HWY_INLINE int AccumulateSlices(float* const (&acc)[H], const float (&rescale)[H], const float* const (&p)[H],
                                const T* v, int64_t v_stride, int jb, int je, int i, int dim) {
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
      const T* vj = v + j * v_stride + i;
#pragma GCC unroll 8
      for (int w = 0; w < W; ++w) {
        VF vv = LoadF32(vj + w * kLanes);
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
template <int H, class T>
HWY_INLINE void AccumulateTile(float* const (&acc)[H], const float (&rescale)[H], const float* const (&p)[H],
                               const T* v, int64_t v_stride, int jb, int je, int dim) {
  // The whole of a 128-dim head in one slice: 16 accumulator chains per key, twice what the FMA
  // latency needs at two FMAs a cycle. 8 / H before: 1 thread, f16 keys, interleaved, EPYC
  // (Zen 5): one row over 512 keys 35.8-37.8 -> 33.7-34.9 us, 16 rows 605-620 -> 587-604 us.
  constexpr int kWide = 16 / H, kNarrow = 4 / H;
  int i = AccumulateSlices<kWide, H>(acc, rescale, p, v, v_stride, jb, je, 0, dim);
  i = AccumulateSlices<kNarrow, H>(acc, rescale, p, v, v_stride, jb, je, i, dim);
  AccumulateSlices<1, H>(acc, rescale, p, v, v_stride, jb, je, i, dim);
}

// exp(s[j] - max) for the kKvTile scores of a tile, vectorised (masked lanes are -inf -> 0).
HWY_INLINE void ExpShifted(float* s, float max) {
  const DF d;
  const auto vmax = hn::Set(d, max);
  for (int j = 0; j < kKvTile; j += kLanes) hn::StoreU(hn::Exp(d, hn::Sub(hn::LoadU(d, s + j), vmax)), d, s + j);
}

// s[j] = s[j] * scale for tile keys j in [jb, je), -inf for the others; returns the max.
HWY_INLINE float ScaleAndMask(float* s, float scale, int jb, int je) {
  const DF d;
  const hn::RebindToSigned<DF> di;
  const auto vneg = hn::Set(d, -std::numeric_limits<float>::infinity()), vscale = hn::Set(d, scale);
  const auto vjb = hn::Set(di, jb), vje = hn::Set(di, je);
  auto vmax = vneg;
  for (int j = 0; j < kKvTile; j += kLanes) {
    const auto idx = hn::Iota(di, j);
    const auto in = hn::RebindMask(d, hn::And(hn::Not(hn::Lt(idx, vjb)), hn::Lt(idx, vje)));
    const auto v = hn::IfThenElse(in, hn::Mul(hn::LoadU(d, s + j), vscale), vneg);
    hn::StoreU(v, d, s + j);
    vmax = hn::Max(vmax, v);
  }
  return hn::GetLane(hn::MaxOfLanes(d, vmax));
}

// x[i] = exp(x[i]) for the (up to four) pairs scored together, lane by lane, so that a pair's
// rescale does not depend on which pairs share the call. One vector exp instead of a libm call
// per pair: 16 rows over 512 f16 keys, 1 thread, EPYC (Zen 5), interleaved: 466-479 -> 437-446 us.
HWY_INLINE void PairRescales(float* x) {
  const hn::CappedTag<float, 4> d4;
  for (size_t i = 0; i < 4; i += hn::Lanes(d4)) hn::Store(hn::Exp(d4, hn::Load(d4, x + i)), d4, x + i);
}

// The sum of a tile's kKvTile exp-shifted scores (masked keys are exactly 0), in one fixed order.
HWY_INLINE float TileSum(const float* s) {
  const DF d;
  auto acc = hn::LoadU(d, s);
  for (int j = kLanes; j < kKvTile; j += kLanes) acc = hn::Add(acc, hn::LoadU(d, s + j));
  return hn::GetLane(hn::SumOfLanes(d, acc));
}

struct RowState {
  float max;
  float sum;
};

// A (row, head) pair of a task with keys [jb, je) in the current tile.
struct ActivePair {
  int pair, jb, je;
};
// Four pairs' accumulators and key vectors fill the 32 AVX-512 registers; half as many for 16.
constexpr int kScorePairs = kLanes >= 16 ? 4 : 2;

void AttentionImpl(const float* q, int64_t M, int64_t q_stride, const AttentionShape& shape, const KvView& kv,
                   const int32_t* key_begin, const int32_t* key_end, float* out, int64_t out_stride,
                   ThreadPool& pool) {
  const int hd = shape.head_dim;
  const int hd_pad = (hd + kLanes - 1) / kLanes * kLanes;
  const int group = shape.n_heads / shape.n_kv_heads;
  const int64_t row_blocks = (M + kQueryRowsPerTask - 1) / kQueryRowsPerTask;
  const size_t elem = kv.type == DType::kF32 ? 4 : 2;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  pool.ParallelFor(shape.n_kv_heads * row_blocks, [&](int64_t task) {
    const int kvh = static_cast<int>(task / row_blocks);
    const int64_t m0 = (task % row_blocks) * kQueryRowsPerTask;
    const int64_t m1 = std::min(M, m0 + kQueryRowsPerTask);
    const int64_t pairs = (m1 - m0) * group;  // (row, head) pairs of this task
    // Per-thread scratch: grows to the largest task once, then never allocates again.
    thread_local std::vector<float> acc_buf, q_buf, k_tile, v_tile;
    thread_local std::vector<RowState> state_buf;
    thread_local std::vector<ActivePair> pass_buf;
    const size_t pair_floats = static_cast<size_t>(pairs) * hd_pad, tile_floats = static_cast<size_t>(kKvTile) * hd_pad;
    if (acc_buf.size() < pair_floats) acc_buf.resize(pair_floats), q_buf.resize(pair_floats);
    if (k_tile.size() < tile_floats) k_tile.resize(tile_floats), v_tile.resize(tile_floats);
    if (state_buf.size() < static_cast<size_t>(pairs)) state_buf.resize(pairs), pass_buf.resize(pairs);
    float* acc = acc_buf.data();
    float* qp = q_buf.data();
    RowState* state = state_buf.data();
    std::fill(acc, acc + pair_floats, 0.0f);
    for (int64_t m = m0; m < m1; ++m) {
      for (int g = 0; g < group; ++g) {
        float* dst = qp + ((m - m0) * group + g) * hd_pad;
        std::memcpy(dst, q + m * q_stride + static_cast<int64_t>(kvh * group + g) * hd, hd * sizeof(float));
      }
    }
    int32_t lo = std::numeric_limits<int32_t>::max(), hi = 0;
    for (int64_t m = m0; m < m1; ++m) {
      if (key_end[m] > key_begin[m]) {
        lo = std::min(lo, key_begin[m]);
        hi = std::max(hi, key_end[m]);
      }
    }
    for (int64_t p = 0; p < pairs; ++p) state[p] = {kNegInf, 0.0f};

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
      const auto update = [&](const auto* kt, const auto* vt, int64_t v_stride) {
        for (int p0 = 0; p0 < active; p0 += kScorePairs) {
          const int count = std::min(kScorePairs, active - p0);
          const ActivePair* pass = pass_buf.data() + p0;
          alignas(64) float s[kScorePairs][kKvTile];
          const auto score = [&]<int H>(int first) {
            const float* qh[H];
            float* sh[H];
            for (int h = 0; h < H; ++h) qh[h] = qp + pass[first + h].pair * hd_pad, sh[h] = s[first + h];
            TileScores<H>(qh, kt, hd, sh);
          };
          int first = 0;
          if constexpr (kScorePairs == 4) {
            if (count == 4) score.template operator()<4>(0), first = 4;
          }
          for (; first + 2 <= count; first += 2) score.template operator()<2>(first);
          if (first < count) score.template operator()<1>(first);
          alignas(16) float rescale[4] = {0.0f, 0.0f, 0.0f, 0.0f}, new_max[kScorePairs];
          for (int i = 0; i < count; ++i) {
            const float old_max = state[pass[i].pair].max;
            new_max[i] = std::max(old_max, ScaleAndMask(s[i], shape.scale, pass[i].jb, pass[i].je));
            rescale[i] = old_max - new_max[i];
          }
          PairRescales(rescale);  // exp(old max - new max): 0 on the first tile
          for (int i = 0; i < count; ++i) {
            RowState& st = state[pass[i].pair];
            ExpShifted(s[i], new_max[i]);
            st.sum = st.sum * rescale[i] + TileSum(s[i]);
            st.max = new_max[i];
          }
          // Pairs 2k and 2k + 1 are one row's heads where the group is even.
          const int step = group % 2 == 0 ? 2 : 1;
          for (int i = 0; i < count; i += step) {
            const auto accumulate = [&]<int H>() {
              float* acch[H];
              float rs[H];
              const float* ph[H];
              for (int h = 0; h < H; ++h) acch[h] = acc + pass[i + h].pair * hd_pad, rs[h] = rescale[i + h], ph[h] = s[i + h];
              AccumulateTile<H>(acch, rs, ph, vt, v_stride, pass[i].jb, pass[i].je, hd_pad);
            };
            if (step == 2) {
              accumulate.template operator()<2>();
            } else {
              accumulate.template operator()<1>();
            }
          }
        }
      };
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
        const bool one_row = m1 - m0 == 1;
        const float* kt = k_tile.data();
        const T* kt_in_place = nullptr;
        if (kv.keys_tiled) {
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
        const float inv = state[pair].sum > 0.0f ? 1.0f / state[pair].sum : 0.0f;
        for (int i = 0; i < hd; ++i) o[i] = acc[pair * hd_pad + i] * inv;
      }
    }
  });
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
    auto* bits = static_cast<uint16_t*>(out);
    for (int64_t i = 0; i < n; ++i) bits[i] = F32ToBF16(x[i]);
  }
}

}  // namespace dflash::ops::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace dflash::ops {
HWY_EXPORT(AttentionImpl);
HWY_EXPORT(StoreKvImpl);

void Attention(const float* q, int64_t M, int64_t q_stride, const AttentionShape& shape, const KvView& kv,
               const int32_t* key_begin, const int32_t* key_end, float* out, int64_t out_stride,
               ThreadPool& pool) {
  if (shape.n_kv_heads <= 0 || shape.n_heads % shape.n_kv_heads != 0)
    Fail("Attention: ", shape.n_heads, " query heads do not group over ", shape.n_kv_heads,
         " key/value heads");
  if (shape.head_dim < 1) Fail("Attention: head_dim ", shape.head_dim, " must be positive");
  CheckKvType(kv.type, "Attention");
  const int64_t tile = int64_t{kKvTile} * shape.head_dim;
  if (kv.keys_tiled && (kv.head_stride % tile != 0 || (shape.n_kv_heads > 1 && kv.head_stride == 0))) {
    Fail("Attention: tiled keys need a head stride that is a multiple of ", kKvTile, " x ", shape.head_dim,
         " elements, have ", kv.head_stride);
  }
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

void StoreKeyTiled(const float* x, int head_dim, DType type, int64_t p, void* head) {
  CheckKvType(type, "StoreKeyTiled");
  const size_t elem = type == DType::kF32 ? 4 : 2;
  uint8_t rounded[4 * 512];
  if (head_dim > 512) Fail("StoreKeyTiled: head_dim ", head_dim, " is over 512");
  StoreKv(x, head_dim, type, rounded);
  auto* out = static_cast<uint8_t*>(head);
  for (int i = 0; i < head_dim; ++i) std::memcpy(out + TiledKeyOffset(p, i, head_dim) * elem, rounded + i * elem, elem);
}
}  // namespace dflash::ops
#endif
