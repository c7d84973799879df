// Attention's AMX-BF16 kernels on one key tile (ops/amx.h; see ops/attention.cc): compiled for
// the AVX3_DL target only, where they define DFLASH_AMX_ATTENTION, and called only where the CPU
// has AMX-BF16. One TDPBF16PS multiplies 16 (row, head) pairs' bf16 queries by 16 keys over 32
// dims (8192 multiply-adds; a vdpbf16ps does 32), so a verify block's scores and value sums
// leave the vector units to the online softmax between them.
//
// The tiled bf16 cache is already the tiles' B operand (ops.h: TiledKeyOffset,
// TiledValueOffset): a key tile's dim pair r holds 32 keys' pairs, 128 bytes, so keys 0-15 and
// 16-31 over 32 dims are each a 16-row B tile with a 128-byte stride; a value tile's position
// pair r holds head_dim dims' pairs, so 16 dims of all 32 positions are a B tile with a
// 4 * head_dim-byte stride. A is 16 pairs' queries (32 dims each) or softmax weights (32 keys).
//
// Batch invariance: row m of C depends only on row m of A and on B, so a pair's scores and value
// sums are the same whichever pairs fill the other rows (stale rows are computed and ignored).
// The tile's value sums are added to the rescaled accumulator once per tile: acc = acc * rescale
// + C, one order for every row count.
#if defined(DFLASH_OPS_ATTENTION_AMX_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef DFLASH_OPS_ATTENTION_AMX_INL_H_
#undef DFLASH_OPS_ATTENTION_AMX_INL_H_
#else
#define DFLASH_OPS_ATTENTION_AMX_INL_H_
#endif

#include <cstdint>

#include "hwy/highway.h"
#include "ops/amx.h"
#include "ops/attention_layout-inl.h"

#undef DFLASH_AMX_ATTENTION  // defined again below for the one target that has the path
#undef DFLASH_AMX_ATTR
HWY_BEFORE_NAMESPACE();
namespace dflash::ops::HWY_NAMESPACE {

#if HWY_TARGET == HWY_AVX3_DL && defined(__x86_64__)
#define DFLASH_AMX_ATTENTION 1
#define DFLASH_AMX_ATTR __attribute__((target("avx512f,avx512bw,amx-tile,amx-bf16")))
constexpr int kAmxPairs = 16;  // (row, head) pairs per A tile
constexpr int kAmxDims = 32;   // query dims (or tile keys) per A row: 16 bf16 pairs, 64 bytes

// The tile intrinsics are asm statements that name no memory; this orders plain stores before a
// tile load, and plain loads after a tile store, against them.
DFLASH_AMX_ATTR inline void TileBarrier() { asm volatile("" ::: "memory"); }

// Every tile 16 rows x 64 bytes: 0 = A (queries, then weights), 1-2 = B (a key tile's halves),
// 3-4 = C (their scores), 5 and 7 = B (16 value dims), 6 and 1 = C (their sums), alternating.
DFLASH_AMX_ATTR inline void ConfigureAttentionTiles() {
  if (LoadedTileConfig() == TileConfig::kAttentionBf16) return;
  alignas(64) uint8_t cfg[64] = {};
  cfg[0] = 1;  // palette 1
  for (int t = 0; t < 8; ++t) {
    const uint16_t colsb = 64;
    __builtin_memcpy(cfg + 16 + 2 * t, &colsb, 2);
    cfg[48 + t] = kAmxPairs;
  }
  TileBarrier();
  _tile_loadconfig(cfg);
  LoadedTileConfig() = TileConfig::kAttentionBf16;
}

// s[r][j] = q_r . key j for the 16 pairs whose bf16 queries start at q (rows q_stride bf16
// apart) and the 32 keys of a paired key tile kt, over dim = a multiple of 32.
DFLASH_AMX_ATTR inline void TileScoresAmx(const uint16_t* q, int64_t q_stride, const uint16_t* kt, int dim,
                                          float (*s)[kKvTile]) {
  TileBarrier();
  _tile_zero(3);
  _tile_zero(4);
  for (int c = 0; c < dim / kAmxDims; ++c) {
    const uint16_t* k = kt + static_cast<int64_t>(c) * (kAmxDims / 2) * kKvTile * 2;  // 16 dim pairs
    _tile_loadd(0, q + c * kAmxDims, q_stride * 2);
    _tile_loadd(1, k, kKvTile * 4);
    _tile_loadd(2, k + kKvTile, kKvTile * 4);
    _tile_dpbf16ps(3, 0, 1);
    _tile_dpbf16ps(4, 0, 2);
  }
  _tile_stored(3, s[0], kKvTile * 4);
  _tile_stored(4, s[0] + kKvTile / 2, kKvTile * 4);
  TileBarrier();
}

// sums[r][i] = sum over the tile's 32 positions j of p[r][j] * value j's dim i, for the 16 pairs'
// bf16 weights p and the position pairs of a value tile v (pair_stride bf16 apart), over dim = a
// multiple of 32; sums rows are dim floats apart. Two tile sets alternate so that one chunk's
// dot product runs while the previous chunk is stored.
DFLASH_AMX_ATTR inline void TileValueSumsAmx(const uint16_t (*p)[kKvTile], const uint16_t* v, int64_t pair_stride,
                                             int dim, float* sums) {
  TileBarrier();
  _tile_loadd(0, p[0], kKvTile * 2);
  for (int i = 0; i < dim; i += 2 * kAmxPairs) {
    _tile_zero(6);
    _tile_loadd(5, v + 2 * i, pair_stride * 2);
    _tile_dpbf16ps(6, 0, 5);
    _tile_zero(1);
    _tile_loadd(7, v + 2 * (i + kAmxPairs), pair_stride * 2);
    _tile_dpbf16ps(1, 0, 7);
    _tile_stored(6, sums + i, dim * 4);
    _tile_stored(1, sums + i + kAmxPairs, dim * 4);
  }
  TileBarrier();
}

// acc = acc * rescale + sums over dim floats (a multiple of 16).
DFLASH_AMX_ATTR inline void RescaleAdd(float* acc, float rescale, const float* sums, int dim) {
  const __m512 r = _mm512_set1_ps(rescale);
  for (int i = 0; i < dim; i += 16)
    _mm512_storeu_ps(acc + i, _mm512_fmadd_ps(_mm512_loadu_ps(acc + i), r, _mm512_loadu_ps(sums + i)));
}

// Asks for the `bytes` from p a tile ahead: the hardware prefetcher does not follow tile loads.
DFLASH_AMX_ATTR inline void PrefetchTile(const void* p, int64_t bytes) {
  for (int64_t b = 0; b < bytes; b += 64) _mm_prefetch(static_cast<const char*>(p) + b, _MM_HINT_T0);
}
#endif  // HWY_TARGET == HWY_AVX3_DL

}  // namespace dflash::ops::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard toggle
