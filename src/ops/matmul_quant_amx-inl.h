// Quantised MatMul's AMX path (ops/amx.h). One tile dot product computes C[r][n] = sum_k
// A[r][k] * B[k/4][n][k%4], the 16 x 16 integer sums of one 32-element block: A is 16 activation
// rows' codes (one group's block, 32 bytes per row), B the block's packed weight codes, whose 8
// vectors of 16 columns x 4 codes are exactly the B layout (Q8_0: in place; Q4_K: once its
// nibbles are split). Row r of C is the block's sums for y[r, the 16 columns], which ScaleBlock
// adds as the VNNI path's Step() would, so the two paths agree bit for bit.
#if defined(DFLASH_OPS_MATMUL_QUANT_AMX_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef DFLASH_OPS_MATMUL_QUANT_AMX_INL_H_
#undef DFLASH_OPS_MATMUL_QUANT_AMX_INL_H_
#else
#define DFLASH_OPS_MATMUL_QUANT_AMX_INL_H_
#endif

#include <algorithm>
#include <cstdint>

#include "core/tensor.h"
#include "hwy/highway.h"
#include "ops/amx.h"
#include "ops/matmul_quant_cpu.h"
#include "ops/matmul_quant_packed-inl.h"
#include "ops/matmul_quant_vnni-inl.h"
#include "ops/quant_activations.h"

HWY_BEFORE_NAMESPACE();
#if HWY_TARGET == HWY_AVX3_DL
DFLASH_VNNI_AMX_TARGET_BEGIN
namespace dflash::ops::HWY_NAMESPACE {
using namespace quant;
namespace hn = hwy::HWY_NAMESPACE;

// The tile intrinsics are asm statements that do not tell the compiler which memory they read
// or write; this orders the buffers written before a tile load, and the reads of a stored C
// tile, against them.
HWY_INLINE void MemoryBarrier() { asm volatile("" ::: "memory"); }

// Two tile sets (see TileDot): 3S = A (16 rows x 32 bytes), 3S + 1 = B (8 rows x 64 bytes),
// 3S + 2 = C (16 x 16 int32). The configuration is per thread; the pool's workers each load it
// when the thread's last one was another kernel's (amx.h: LoadedTileConfig).
void ConfigureTiles() {
  if (LoadedTileConfig() == TileConfig::kMatMulInt8) return;
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
  LoadedTileConfig() = TileConfig::kMatMulInt8;
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

}  // namespace dflash::ops::HWY_NAMESPACE
DFLASH_VNNI_AMX_TARGET_END
#endif  // HWY_TARGET == HWY_AVX3_DL
HWY_AFTER_NAMESPACE();

#endif  // include guard toggle
