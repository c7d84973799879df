// Activation rows quantised to int8 blocks for quantised MatMul (ops/quant_activations.h has the
// format and its numbers), per SIMD target, spread over the pool.
#if defined(DFLASH_OPS_QUANTIZE_ACTIVATIONS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef DFLASH_OPS_QUANTIZE_ACTIVATIONS_INL_H_
#undef DFLASH_OPS_QUANTIZE_ACTIVATIONS_INL_H_
#else
#define DFLASH_OPS_QUANTIZE_ACTIVATIONS_INL_H_
#endif

#include <algorithm>
#include <bit>
#include <cstdint>

#include "core/thread_pool.h"
#include "hwy/highway.h"
#include "ops/matmul_quant_cpu.h"
#include "ops/quant_activations.h"
#include "ops/quant_blocks.h"

HWY_BEFORE_NAMESPACE();
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

}  // namespace dflash::ops::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard toggle
