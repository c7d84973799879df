// Scaled dot-product attention with per-row key ranges and an online softmax, over an f32,
// f16 or bf16 KV cache.
//
// One task = one KV head x a block of query rows. Keys are walked in tiles of kKeyTile
// positions aligned to absolute multiples of kKeyTile. For several rows, a tile's keys and
// values are widened to f32 once per task, into a scratch tile that stays in L1, and every
// query row and every query head of the GQA group that reads this KV head is updated from it: a
// 16-row verify streams the KV cache once, not 16 times. One row reads the tile in place,
// widening in registers. Either way each value reaches the arithmetic as the same f32. Where
// the group is even its query heads go two at a time, so each widened key or value vector
// feeds two heads' FMAs: one row over an f16 cache, 1 thread, Qwen3-0.6B heads, 512 keys
// 101-109 -> 69-72 us (bench/attention_bench.cc), the widening being as costly as the FMA.
//
// Scores are computed N keys at a time (N = vector lanes, or half of it for a pair of heads):
// per-key accumulators take the lane-wise products over head_dim, then a fixed tree of
// even/odd lane pair adds folds them into one vector of dot products. That costs about three
// shuffles and adds per key instead of a horizontal sum per key, so a verify block is bound by
// the FMAs, not by reductions.
//
// Batch invariance: a (row, head) pair's result depends only on its query, its key range and
// the fixed tile grid, never on the other rows in the call. Each score is one fixed reduction
// order over head_dim; the softmax state (running max, running sum, output accumulator) is
// updated tile by tile in ascending key order.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/attention.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"

#ifndef DFLASH_OPS_ATTENTION_ONCE
#define DFLASH_OPS_ATTENTION_ONCE
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "ops/ops.h"
namespace dflash::ops {
constexpr int kKeyTile = 32;
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
static_assert(kKeyTile % kLanes == 0, "a key tile must hold whole vectors of keys");

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

// s[h][j] = dot(q[h], kt + j * ks) over dim floats (a multiple of kLanes) for H query heads
// that read the same keys, for the key blocks [j_begin, j_end) of a tile (multiples of kLanes).
// Keys go kLanes / H at a time, so every widened key vector serves all H heads from one load
// (for a 16-bit cache the widening costs as much as the FMA) while the accumulators still fit
// in registers. Each (head, key) has its own accumulator of kLanes lane-wise partial sums over
// head_dim, folded by the same balanced tree of adjacent-lane adds for every H and block, so a
// score never depends on H, the block bounds or the other keys computed with it.
template <int H, class T>
HWY_INLINE void TileScores(const float* const (&q)[H], const T* kt, int64_t ks, int dim, int j_begin, int j_end,
                           float* const (&s)[H]) {
  static_assert(H == 1 || H == 2, "heads are scored one or two at a time");
  constexpr int kKeys = kLanes / H > 0 ? kLanes / H : 1;
  const DF d;
  for (int j0 = j_begin; j0 < j_end; j0 += kKeys) {
    VF acc[H][kKeys];
    const T* k0 = kt + j0 * ks;
    VF qv[H];
    for (int h = 0; h < H; ++h) qv[h] = hn::LoadU(d, q[h]);
#pragma GCC unroll 16
    for (int j = 0; j < kKeys; ++j) {
      const VF kv = LoadF32(k0 + j * ks);
      for (int h = 0; h < H; ++h) acc[h][j] = hn::Mul(qv[h], kv);
    }
    for (int i = kLanes; i < dim; i += kLanes) {
      for (int h = 0; h < H; ++h) qv[h] = hn::LoadU(d, q[h] + i);
#pragma GCC unroll 16
      for (int j = 0; j < kKeys; ++j) {
        const VF kv = LoadF32(k0 + j * ks + i);
        for (int h = 0; h < H; ++h) acc[h][j] = hn::MulAdd(qv[h], kv, acc[h][j]);
      }
    }
#pragma GCC unroll 2
    for (int h = 0; h < H; ++h) {
      // Fold: every step pairs each key's partial sums with their neighbours, halving its
      // lanes; a step that leaves n vectors makes acc[j] hold keys j*kKeys/n .. (j+1)*kKeys/n - 1.
      // Once one vector is left it folds with itself until each key has one lane: key j0 + j
      // in lane j.
#if HWY_TARGET != HWY_SCALAR  // one lane: acc already is the dot product
#pragma GCC unroll 16
      for (int n = kKeys; n > 1; n /= 2) {
#pragma GCC unroll 16
        for (int j = 0; j < n / 2; ++j) {
          acc[h][j] = hn::Add(hn::ConcatEven(d, acc[h][2 * j + 1], acc[h][2 * j]),
                              hn::ConcatOdd(d, acc[h][2 * j + 1], acc[h][2 * j]));
        }
      }
      for (int lanes = kLanes / kKeys; lanes > 1; lanes /= 2)
        acc[h][0] = hn::Add(hn::ConcatEven(d, acc[h][0], acc[h][0]), hn::ConcatOdd(d, acc[h][0], acc[h][0]));
#endif
      if constexpr (kKeys == kLanes) {
        hn::StoreU(acc[h][0], d, s[h] + j0);
      } else {
        const hn::Half<DF> dh;
        hn::StoreU(hn::LowerHalf(dh, acc[h][0]), dh, s[h] + j0);
      }
    }
  }
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
        const VF vv = LoadF32(vj + w * kLanes);
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
  constexpr int kWide = 8 / H, kNarrow = 4 / H;
  int i = AccumulateSlices<kWide, H>(acc, rescale, p, v, v_stride, jb, je, 0, dim);
  i = AccumulateSlices<kNarrow, H>(acc, rescale, p, v, v_stride, jb, je, i, dim);
  AccumulateSlices<1, H>(acc, rescale, p, v, v_stride, jb, je, i, dim);
}

// exp(s[j] - max) for the kKeyTile scores of a tile, vectorised (masked lanes are -inf -> 0).
HWY_INLINE void ExpShifted(float* s, float max) {
  const DF d;
  const auto vmax = hn::Set(d, max);
  for (int j = 0; j < kKeyTile; j += kLanes) hn::StoreU(hn::Exp(d, hn::Sub(hn::LoadU(d, s + j), vmax)), d, s + j);
}

// s[j] = s[j] * scale for tile keys j in [jb, je), -inf for the others; returns the max.
HWY_INLINE float ScaleAndMask(float* s, float scale, int jb, int je) {
  const DF d;
  const hn::RebindToSigned<DF> di;
  const auto vneg = hn::Set(d, -std::numeric_limits<float>::infinity()), vscale = hn::Set(d, scale);
  const auto vjb = hn::Set(di, jb), vje = hn::Set(di, je);
  auto vmax = vneg;
  for (int j = 0; j < kKeyTile; j += kLanes) {
    const auto idx = hn::Iota(di, j);
    const auto in = hn::RebindMask(d, hn::And(hn::Not(hn::Lt(idx, vjb)), hn::Lt(idx, vje)));
    const auto v = hn::IfThenElse(in, hn::Mul(hn::LoadU(d, s + j), vscale), vneg);
    hn::StoreU(v, d, s + j);
    vmax = hn::Max(vmax, v);
  }
  return hn::GetLane(hn::MaxOfLanes(d, vmax));
}

// The sum of a tile's kKeyTile exp-shifted scores (masked keys are exactly 0), in one fixed order.
HWY_INLINE float TileSum(const float* s) {
  const DF d;
  auto acc = hn::LoadU(d, s);
  for (int j = kLanes; j < kKeyTile; j += kLanes) acc = hn::Add(acc, hn::LoadU(d, s + j));
  return hn::GetLane(hn::SumOfLanes(d, acc));
}

struct RowState {
  float max;
  float sum;
};

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
    const size_t pair_floats = static_cast<size_t>(pairs) * hd_pad, tile_floats = static_cast<size_t>(kKeyTile) * hd_pad;
    if (acc_buf.size() < pair_floats) acc_buf.resize(pair_floats), q_buf.resize(pair_floats);
    if (k_tile.size() < tile_floats) k_tile.resize(tile_floats), v_tile.resize(tile_floats);
    if (state_buf.size() < static_cast<size_t>(pairs)) state_buf.resize(pairs);
    float* acc = acc_buf.data();
    float* qp = q_buf.data();
    RowState* state = state_buf.data();
    std::fill(acc, acc + pair_floats, 0.0f);
    for (int64_t m = m0; m < m1; ++m) {
      for (int g = 0; g < group; ++g) {
        float* dst = qp + ((m - m0) * group + g) * hd_pad;
        std::memcpy(dst, q + m * q_stride + static_cast<int64_t>(kvh * group + g) * hd, hd * sizeof(float));
        std::fill(dst + hd, dst + hd_pad, 0.0f);
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
    for (int64_t t0 = (lo / kKeyTile) * kKeyTile; t0 < hi; t0 += kKeyTile) {
      const int rows = static_cast<int>(std::min<int64_t>(kKeyTile, hi - t0));
      // The query heads of a group are updated H at a time (two where the group is even):
      // they read the same keys and values, so each widened K/V vector serves H heads.
      const auto update_heads = [&]<int H>(const auto* kt, const auto* vt, int64_t tile_stride, int64_t m,
                                           int jb, int je, int g0) {
        alignas(64) float s[H][kKeyTile];
        const float* qh[H];
        float* sh[H];
        float* acch[H];
        float rescale[H];
        for (int h = 0; h < H; ++h) {
          const int64_t pair = (m - m0) * group + g0 + h;
          qh[h] = qp + pair * hd_pad;
          sh[h] = s[h];
          acch[h] = acc + pair * hd_pad;
        }
        TileScores<H>(qh, kt, tile_stride, hd_pad, jb / kLanes * kLanes, (je + kLanes - 1) / kLanes * kLanes, sh);
        for (int h = 0; h < H; ++h) {
          const float tile_max = ScaleAndMask(s[h], shape.scale, jb, je);
          RowState& st = state[(m - m0) * group + g0 + h];
          const float new_max = std::max(st.max, tile_max);
          rescale[h] = std::exp(st.max - new_max);  // 0 on the first tile
          ExpShifted(s[h], new_max);
          st.sum = st.sum * rescale[h] + TileSum(s[h]);
          st.max = new_max;
        }
        const float* ph[H];
        for (int h = 0; h < H; ++h) ph[h] = s[h];
        AccumulateTile<H>(acch, rescale, ph, vt, tile_stride, jb, je, hd_pad);
      };
      const auto update = [&](const auto* kt, const auto* vt, int64_t tile_stride) {
        for (int64_t m = m0; m < m1; ++m) {
          const int jb = static_cast<int>(std::max<int64_t>(key_begin[m], t0) - t0);
          const int je = static_cast<int>(std::min<int64_t>(key_end[m], t0 + kKeyTile) - t0);
          if (jb >= je) continue;
          if (group % 2 == 0) {
            for (int g = 0; g < group; g += 2) update_heads.template operator()<2>(kt, vt, tile_stride, m, jb, je, g);
          } else {
            for (int g = 0; g < group; ++g) update_heads.template operator()<1>(kt, vt, tile_stride, m, jb, je, g);
          }
        }
      };
      // A whole tile without padding is read in place when one row reads it, widened in
      // registers (the same values, no copy). For several rows it is widened once into the
      // scratch tiles: that halves what the rows re-read for a 16-bit cache, and in a cache
      // whose positions are n_kv_heads * head_dim elements apart a tile's rows in place would
      // all fall into the same few L1 sets and be evicted before the next row reads them.
      const uint8_t* k_rows = k_head + t0 * kv.stride * elem;
      const uint8_t* v_rows = v_head + t0 * kv.stride * elem;
      WithKvElement(kv.type, [&](const auto* element) {
        using T = std::remove_const_t<std::remove_pointer_t<decltype(element)>>;
        const T* k_src = reinterpret_cast<const T*>(k_rows);
        const T* v_src = reinterpret_cast<const T*>(v_rows);
        if (hd_pad == hd && rows == kKeyTile && m1 - m0 == 1) {
          update(k_src, v_src, kv.stride);
          return;
        }
        // Keys at and past `hi` may not exist: the tile's rows for them stay zero and unread.
        WidenRows(k_src, kv.stride, rows, hd, hd_pad, k_tile.data());
        WidenRows(v_src, kv.stride, rows, hd, hd_pad, v_tile.data());
        std::fill(k_tile.data() + static_cast<size_t>(rows) * hd_pad, k_tile.data() + tile_floats, 0.0f);
        update(k_tile.data(), v_tile.data(), hd_pad);
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
}  // namespace dflash::ops
#endif
