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
//
// The kernels live per family in *-inl.h files compiled once per SIMD target: KV layouts
// (attention_layout-inl.h), f32 tile kernels (attention_f32-inl.h), bf16 dot products
// (attention_bf16-inl.h), the online softmax (softmax-inl.h). This file splits the work into
// tasks and walks each task's key tiles; ops/kv_store.cc writes the caches.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/attention.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"
#include "ops/attention_amx-inl.h"
#include "ops/attention_bf16-inl.h"
#include "ops/attention_f32-inl.h"
#include "ops/attention_layout-inl.h"
#include "ops/bf16_round-inl.h"
#include "ops/softmax-inl.h"

#ifndef DFLASH_OPS_ATTENTION_ONCE
#define DFLASH_OPS_ATTENTION_ONCE
#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "ops/amx.h"
#include "ops/cpu_features.h"
#include "ops/ops.h"
namespace dflash::ops {
constexpr int64_t kQueryRowsPerTask = 16;
}  // namespace dflash::ops
#endif

HWY_BEFORE_NAMESPACE();
namespace dflash::ops::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// A thread's scratch for its tasks: grows to the largest task once, then never allocates again.
struct Scratch {
  std::vector<float> acc, q;          // [pair][hd_pad]: output accumulators, queries
  std::vector<float> k_tile, v_tile;  // a key tile dim-major, a value tile's rows, as f32
  std::vector<RowState> state;        // [pair]
  std::vector<ActivePair> pass;       // the pairs with keys in the current tile
  std::vector<uint16_t> q16, k16_tile, v16_tile;  // the bf16 dot path's
  // The AMX path's, for one block of 16 pairs: scores, bf16 weights, value sums, rescales.
  std::vector<float> block_scores, block_sums, block_rescale;
  std::vector<uint16_t> block_weights;

  // The AMX path reads whole blocks of 16 pairs' queries: q16 is padded to them.
  void Fit(int64_t pairs, int hd_pad, bool bf16_dot, bool amx) {
    const size_t pair_floats = static_cast<size_t>(pairs) * hd_pad, tile_floats = static_cast<size_t>(kKvTile) * hd_pad;
    if (acc.size() < pair_floats) acc.resize(pair_floats), q.resize(pair_floats);
    if (k_tile.size() < tile_floats) k_tile.resize(tile_floats), v_tile.resize(tile_floats);
    if (state.size() < static_cast<size_t>(pairs)) state.resize(pairs), pass.resize(pairs);
    const size_t q16_size = amx ? (pairs + 15) / 16 * 16 * static_cast<size_t>(hd_pad) : pair_floats;
    if (bf16_dot && q16.size() < q16_size) q16.resize(q16_size);
    if (bf16_dot && k16_tile.size() < tile_floats) k16_tile.resize(tile_floats), v16_tile.resize(tile_floats);
    if (amx && block_sums.size() < 16 * static_cast<size_t>(hd_pad)) {
      block_scores.resize(16 * kKvTile), block_weights.resize(16 * kKvTile), block_rescale.resize(16);
      block_sums.resize(16 * static_cast<size_t>(hd_pad));
    }
  }
};

// One task: KV head kvh and query rows [m0, m1), whose (row, head) pairs are numbered
// (m - m0) * group + g.
struct Task {
  const KvView& kv;
  int hd, hd_pad, group, kvh;
  int64_t m0, m1;
  bool bf16_dot, amx;
  Scratch& s;
};

// The task's queries copied hd_pad floats apart, zero-padded (and rounded to bf16 for the bf16
// dot path); accumulators zero and softmax states empty.
void StartTask(const Task& t, const float* q, int64_t q_stride) {
  for (int64_t m = t.m0; m < t.m1; ++m) {
    for (int g = 0; g < t.group; ++g) {
      const int64_t pair = (m - t.m0) * t.group + g;
      float* dst = t.s.q.data() + pair * t.hd_pad;
      std::memcpy(dst, q + m * q_stride + static_cast<int64_t>(t.kvh * t.group + g) * t.hd, t.hd * sizeof(float));
      std::fill(dst + t.hd, dst + t.hd_pad, 0.0f);
      if (!t.bf16_dot) continue;
      uint16_t* q16 = t.s.q16.data() + pair * t.hd_pad;
      for (int i = 0; i < t.hd_pad; i += kLanes) RoundToBf16(DF(), hn::LoadU(DF(), dst + i), q16 + i);
    }
  }
  const int64_t pairs = (t.m1 - t.m0) * t.group;
  std::fill(t.s.acc.data(), t.s.acc.data() + pairs * t.hd_pad, 0.0f);
  for (int64_t p = 0; p < pairs; ++p) t.s.state[p] = {-std::numeric_limits<float>::infinity(), {}};
}

// The active pairs scored up to four at a time, so each widened key vector feeds four FMAs
// (two rows' head pairs in a verify block); their softmax state stepped; their values added two
// heads at a time where the group is even (pairs 2k and 2k + 1 are then one row's heads).
// score<H>(pairs, s) and accumulate<H>(pairs, rescale, s, p16) are a path's kernels; round_bf16
// rounds the weights into p16 for the bf16 dot path.
template <class Score, class Accumulate>
HWY_INLINE void UpdatePairs(const Task& t, int active, float scale, const Score& score, const Accumulate& accumulate,
                            bool round_bf16) {
  for (int p0 = 0; p0 < active; p0 += kScorePairs) {
    const int count = std::min(kScorePairs, active - p0);
    const ActivePair* pass = t.s.pass.data() + p0;
    alignas(64) float s[kScorePairs][kKvTile];
    alignas(64) uint16_t p16[kScorePairs][kKvTile];
    int first = 0;
    if constexpr (kScorePairs == 4) {
      if (count == 4) score.template operator()<4>(pass, s), first = 4;
    }
    for (; first + 2 <= count; first += 2) score.template operator()<2>(pass + first, s + first);
    if (first < count) score.template operator()<1>(pass + first, s + first);
    alignas(16) float rescale[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    SoftmaxStep(s, count, pass, t.s.state.data(), scale, rescale, round_bf16 ? p16 : nullptr);
    const int step = t.group % 2 == 0 ? 2 : 1;
    for (int i = 0; i < count; i += step) {
      if (step == 2) {
        accumulate.template operator()<2>(pass + i, rescale + i, s + i, p16 + i);
      } else {
        accumulate.template operator()<1>(pass + i, rescale + i, s + i, p16 + i);
      }
    }
  }
}

#ifdef DFLASH_AMX_ATTENTION
// A value tile's position pairs (pair_stride bf16 apart) into dst (2 * hd apart, may be src) with
// the positions outside `keep` (bit j: position j) zeroed: no pair reads them, so they may not
// be numbers, and a zero weight times NaN is NaN in a tile's sum.
void MaskValuePairs(const uint16_t* src, int64_t pair_stride, int hd, uint32_t keep, uint16_t* dst) {
  for (int j = 0; j < kKvTile; ++j) {
    const bool kept = (keep >> j) & 1;
    const uint16_t* from = src + j / 2 * pair_stride + j % 2;
    uint16_t* to = dst + j / 2 * 2 * hd + j % 2;
    for (int i = 0; i < 2 * hd; i += 2) to[i] = kept ? from[i] : uint16_t{0};
  }
}

// The AMX path's tile (attention_amx-inl.h): each block of 16 pairs with an active pair is
// scored at once, its active pairs' softmax stepped four at a time (as the other paths do),
// then the block's value sums added to their rescaled accumulators. kt: a paired key tile;
// vt: its value pairs, pair_stride bf16 apart.
void UpdateTileAmx(const Task& t, int active, float scale, const uint16_t* kt, const uint16_t* vt,
                   int64_t pair_stride) {
  Scratch& sc = t.s;
  const int hd = t.hd;
  uint32_t keep = 0;  // the positions any active pair reads
  for (int a = 0; a < active; ++a) {
    const ActivePair& p = sc.pass[a];
    keep |= static_cast<uint32_t>((uint64_t{1} << p.je) - (uint64_t{1} << p.jb));
  }
  if (keep != ~uint32_t{0}) {
    MaskValuePairs(vt, pair_stride, hd, keep, sc.v16_tile.data());
    vt = sc.v16_tile.data(), pair_stride = 2 * hd;
  }
  auto* scores = reinterpret_cast<float(*)[kKvTile]>(sc.block_scores.data());
  auto* weights = reinterpret_cast<uint16_t(*)[kKvTile]>(sc.block_weights.data());
  for (int a0 = 0, a1; a0 < active; a0 = a1) {
    const int block = sc.pass[a0].pair / kAmxPairs, base = block * kAmxPairs;
    for (a1 = a0; a1 < active && sc.pass[a1].pair / kAmxPairs == block;) ++a1;
    TileScoresAmx(sc.q16.data() + static_cast<int64_t>(base) * t.hd_pad, t.hd_pad, kt, hd, scores);
    for (int c0 = a0; c0 < a1; c0 += kScorePairs) {
      const int count = std::min(kScorePairs, a1 - c0);
      const ActivePair* pass = sc.pass.data() + c0;
      alignas(64) float s[kScorePairs][kKvTile];
      alignas(64) uint16_t p16[kScorePairs][kKvTile];
      alignas(16) float rescale[4];
      for (int i = 0; i < count; ++i) std::memcpy(s[i], scores[pass[i].pair - base], sizeof(s[i]));
      SoftmaxStep(s, count, pass, sc.state.data(), scale, rescale, p16);
      for (int i = 0; i < count; ++i) {
        std::memcpy(weights[pass[i].pair - base], p16[i], sizeof(p16[i]));
        sc.block_rescale[pass[i].pair - base] = rescale[i];
      }
    }
    TileValueSumsAmx(weights, vt, pair_stride, hd, sc.block_sums.data());
    for (int a = a0; a < a1; ++a) {
      const int r = sc.pass[a].pair - base;
      RescaleAdd(sc.acc.data() + static_cast<int64_t>(sc.pass[a].pair) * t.hd_pad, sc.block_rescale[r],
                 sc.block_sums.data() + static_cast<int64_t>(r) * hd, hd);
    }
  }
}
#endif

// The key tile from position t0 (`rows` of its positions exist) for the task's `active` pairs.
// One row reads a tiled key cache in place, and a whole tile of values without padding in place
// too, widened in registers (the same values, no copy). For several rows the tile is widened
// once into the scratch tiles: that halves what the rows re-read for a 16-bit cache, and in a
// cache whose positions are n_kv_heads * head_dim elements apart a tile's rows in place would
// all fall into the same few L1 sets and be evicted before the next row reads them. Keys stored
// as rows are always transposed into scratch.
void AttendTile(const Task& t, int64_t t0, int rows, int active, float scale, const uint8_t* k_head,
                const uint8_t* v_head) {
  const KvView& kv = t.kv;
  const int hd = t.hd, hd_pad = t.hd_pad;
  Scratch& sc = t.s;
  using Scores = float (*)[kKvTile];
  using Weights16 = uint16_t (*)[kKvTile];
  const auto update = [&](auto kt, auto vt, int64_t v_stride) {
    const auto score = [&]<int H>(const ActivePair* pass, Scores s) {
      const float* qh[H];
      float* sh[H];
      for (int h = 0; h < H; ++h) qh[h] = sc.q.data() + pass[h].pair * hd_pad, sh[h] = s[h];
      TileScores<H>(qh, kt, hd, sh);
    };
    const auto accumulate = [&]<int H>(const ActivePair* pass, const float* rescale, Scores s, Weights16) {
      float* acch[H];
      float rs[H];
      const float* ph[H];
      for (int h = 0; h < H; ++h) acch[h] = sc.acc.data() + pass[h].pair * hd_pad, rs[h] = rescale[h], ph[h] = s[h];
      AccumulateTile<H>(acch, rs, ph, vt, v_stride, pass[0].jb, pass[0].je, hd_pad);
    };
    UpdatePairs(t, active, scale, score, accumulate, false);
  };
#ifdef DFLASH_BF16_DOT
  // The bf16 dot path (see the top of this file): bf16 pairs of queries, keys, weights and
  // values, read as 32-bit words.
  const auto update_bf16 = [&](const uint16_t* kt, const uint16_t* vt, int64_t pair_stride) {
#ifdef DFLASH_AMX_ATTENTION
    if (t.amx) return UpdateTileAmx(t, active, scale, kt, vt, pair_stride);
#endif
    const auto words = [](const uint16_t* bf16) { return reinterpret_cast<const uint32_t*>(bf16); };
    const auto score = [&]<int H>(const ActivePair* pass, Scores s) {
      const uint32_t* qh[H];
      float* sh[H];
      for (int h = 0; h < H; ++h) qh[h] = words(sc.q16.data() + pass[h].pair * hd_pad), sh[h] = s[h];
      TileScoresBf16<H>(qh, kt, (hd + 1) / 2, sh);
    };
    const auto accumulate = [&]<int H>(const ActivePair* pass, const float* rescale, Scores, Weights16 p16) {
      float* acch[H];
      float rs[H];
      const uint32_t* ph[H];
      for (int h = 0; h < H; ++h) acch[h] = sc.acc.data() + pass[h].pair * hd_pad, rs[h] = rescale[h], ph[h] = words(p16[h]);
      AccumulateTileBf16<H>(acch, rs, ph, vt, pair_stride, pass[0].jb, pass[0].je, hd_pad);
    };
    UpdatePairs(t, active, scale, score, accumulate, true);
  };
#endif
  const size_t elem = kv.type == DType::kF32 ? 4 : 2;
  const uint8_t* v_rows = v_head + t0 * kv.stride * elem;
  const bool one_row = t.m1 - t.m0 == 1;
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
        if (t.bf16_dot) {
#ifdef DFLASH_AMX_ATTENTION
          if (t.amx) {  // the next tile's keys and values, while this one is attended
            PrefetchTile(k_pairs + kKvTile * hd, int64_t{kKvTile} * hd * 2);
            PrefetchTile(v_pairs + kKvTile * hd, int64_t{kKvTile} * hd * 2);
          }
#endif
          if (hd == hd_pad) return update_bf16(k_pairs, v_pairs, 2 * hd);
          PadValuePairs(v_pairs, rows, hd, hd_pad, sc.v16_tile.data());
          return update_bf16(k_pairs, sc.v16_tile.data(), 2 * hd_pad);
        }
#endif
        if (one_row) {  // as for other types: in place, widened in registers
          if (hd == hd_pad) return update(Bf16Pairs{k_pairs}, Bf16Pairs{v_pairs}, 2 * hd);
          WidenValuePairs(v_pairs, rows, hd, hd_pad, sc.v_tile.data());
          return update(Bf16Pairs{k_pairs}, sc.v_tile.data(), hd_pad);
        }
        WidenKeyPairs(k_pairs, hd, sc.k_tile.data());
        WidenValuePairs(v_pairs, rows, hd, hd_pad, sc.v_tile.data());
        return update(sc.k_tile.data(), sc.v_tile.data(), hd_pad);
      }
#ifdef DFLASH_BF16_DOT
      if (t.bf16_dot) {
        PairKeys(k16 + t0 * kv.stride, kv.stride, rows, hd, hd_pad, sc.k16_tile.data());
        PairValues(v16 + t0 * kv.stride, kv.stride, rows, hd, hd_pad, sc.v16_tile.data());
        return update_bf16(sc.k16_tile.data(), sc.v16_tile.data(), 2 * hd_pad);
      }
#endif
    }
    const float* kt = sc.k_tile.data();
    const T* kt_in_place = nullptr;
    if (kv.tiled) {
      const T* k_src = reinterpret_cast<const T*>(k_head) + t0 * hd;  // tile t0 / kKvTile
      if (one_row) {
        kt_in_place = k_src;
      } else {
        WidenTile(k_src, hd, sc.k_tile.data());
      }
    } else {
      // Keys at and past the task's last key may not exist: the tile's keys for them stay zero and unread.
      TransposeKeys(reinterpret_cast<const T*>(k_head + t0 * kv.stride * elem), kv.stride, rows, hd, sc.k_tile.data());
    }
    const bool v_in_place = one_row && hd_pad == hd && rows == kKvTile;
    if (!v_in_place) WidenRows(v_src, kv.stride, rows, hd, hd_pad, sc.v_tile.data());
    if (kt_in_place && v_in_place) return update(kt_in_place, v_src, kv.stride);
    if (kt_in_place) return update(kt_in_place, sc.v_tile.data(), hd_pad);
    if (v_in_place) return update(kt, v_src, kv.stride);
    update(kt, sc.v_tile.data(), hd_pad);
  });
}

// Each pair's accumulator divided by its softmax sum, into its row and head of out.
void FinishTask(const Task& t, float* out, int64_t out_stride) {
  for (int64_t m = t.m0; m < t.m1; ++m) {
    for (int g = 0; g < t.group; ++g) {
      const int64_t pair = (m - t.m0) * t.group + g;
      float* o = out + m * out_stride + static_cast<int64_t>(t.kvh * t.group + g) * t.hd;
      const float sum = t.s.state[pair].Sum();
      const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
      for (int i = 0; i < t.hd; ++i) o[i] = t.s.acc[pair * t.hd_pad + i] * inv;
    }
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
#ifdef DFLASH_BF16_DOT
  const bool bf16_dot = kv.type == DType::kBF16 && CpuHasAvx512Bf16() && Bf16DotAllowed();
#else
  constexpr bool bf16_dot = false;
#endif
#ifdef DFLASH_AMX_ATTENTION
  const bool amx = bf16_dot && hd % kAmxDims == 0 && AmxBf16Supported();
#else
  constexpr bool amx = false;
#endif
  pool.ParallelFor(shape.n_kv_heads * row_blocks, [&](int64_t task) {
    thread_local Scratch scratch;
    const int64_t m0 = (task % row_blocks) * kQueryRowsPerTask;
    const Task t{kv, hd, hd_pad, group, static_cast<int>(task / row_blocks), m0, std::min(M, m0 + kQueryRowsPerTask),
                 bf16_dot, amx, scratch};
    scratch.Fit((t.m1 - t.m0) * group, hd_pad, bf16_dot, amx);
#ifdef DFLASH_AMX_ATTENTION
    if (amx) ConfigureAttentionTiles();
#endif
    StartTask(t, q, q_stride);
    int32_t lo = std::numeric_limits<int32_t>::max(), hi = 0;  // the keys any row reads
    for (int64_t m = t.m0; m < t.m1; ++m) {
      if (key_end[m] > key_begin[m]) lo = std::min(lo, key_begin[m]), hi = std::max(hi, key_end[m]);
    }
    const size_t head_offset = static_cast<size_t>(t.kvh) * (kv.head_stride ? kv.head_stride : hd) * elem;
    const auto* k_head = static_cast<const uint8_t*>(kv.k) + head_offset;
    const auto* v_head = static_cast<const uint8_t*>(kv.v) + head_offset;
    for (int64_t t0 = (lo / kKvTile) * kKvTile; t0 < hi; t0 += kKvTile) {
      int active = 0;  // the pairs with keys in this tile
      for (int64_t m = t.m0; m < t.m1; ++m) {
        const int jb = static_cast<int>(std::max<int64_t>(key_begin[m], t0) - t0);
        const int je = static_cast<int>(std::min<int64_t>(key_end[m], t0 + kKvTile) - t0);
        if (jb >= je) continue;
        for (int g = 0; g < group; ++g) scratch.pass[active++] = {static_cast<int>((m - t.m0) * group + g), jb, je};
      }
      AttendTile(t, t0, static_cast<int>(std::min<int64_t>(kKvTile, hi - t0)), active, shape.scale, k_head, v_head);
    }
    FinishTask(t, out, out_stride);
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

}  // namespace dflash::ops::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace dflash::ops {
HWY_EXPORT(AttentionImpl);
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

bool Bf16DotActive() { return Bf16DotAllowed() && HWY_DYNAMIC_DISPATCH(HasBf16DotImpl)(); }
}  // namespace dflash::ops
#endif
