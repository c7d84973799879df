// Scaled dot-product attention with per-row key ranges and an online softmax.
//
// One task = one KV head x a block of query rows. Keys are walked in tiles of kKeyTile
// positions aligned to absolute multiples of kKeyTile, and every query row and every query
// head of the GQA group that reads this KV head is updated from the tile while it is in cache:
// a 16-row verify streams the KV cache once, not 16 times, which is what keeps its cost near
// one decode step at long context.
//
// Batch invariance: a (row, head) pair's result depends only on its query, its key range and
// the fixed tile grid, never on the other rows in the call. Its softmax state (running max,
// running sum, output accumulator) is updated tile by tile in ascending key order.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/attention.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"

#ifndef DFLASH_OPS_ATTENTION_ONCE
#define DFLASH_OPS_ATTENTION_ONCE
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"
#include "ops/ops.h"
namespace dflash::ops {
constexpr int kKeyTile = 32;
constexpr int64_t kQueryRowsPerTask = 16;
}  // namespace dflash::ops
#endif

HWY_BEFORE_NAMESPACE();
namespace dflash::ops::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

HWY_INLINE float Dot(const float* a, const float* b, int dim) {
  const hn::ScalableTag<float> d;
  const int N = static_cast<int>(hn::Lanes(d));
  auto acc = hn::Zero(d);
  int i = 0;
  for (; i + N <= dim; i += N) acc = hn::MulAdd(hn::LoadU(d, a + i), hn::LoadU(d, b + i), acc);
  float sum = hn::GetLane(hn::SumOfLanes(d, acc));
  for (; i < dim; ++i) sum += a[i] * b[i];
  return sum;
}

// Dot(q, k + i * stride, dim) for i < 4, bit for bit: each key keeps its own accumulator and
// order; computing four at once only gives the FMA units four independent chains to overlap.
HWY_INLINE void Dot4(const float* q, const float* k, int64_t stride, int dim, float* out) {
  const hn::ScalableTag<float> d;
  const int N = static_cast<int>(hn::Lanes(d));
  auto a0 = hn::Zero(d), a1 = hn::Zero(d), a2 = hn::Zero(d), a3 = hn::Zero(d);
  int i = 0;
  for (; i + N <= dim; i += N) {
    const auto qv = hn::LoadU(d, q + i);
    a0 = hn::MulAdd(qv, hn::LoadU(d, k + i), a0);
    a1 = hn::MulAdd(qv, hn::LoadU(d, k + stride + i), a1);
    a2 = hn::MulAdd(qv, hn::LoadU(d, k + 2 * stride + i), a2);
    a3 = hn::MulAdd(qv, hn::LoadU(d, k + 3 * stride + i), a3);
  }
  out[0] = hn::GetLane(hn::SumOfLanes(d, a0));
  out[1] = hn::GetLane(hn::SumOfLanes(d, a1));
  out[2] = hn::GetLane(hn::SumOfLanes(d, a2));
  out[3] = hn::GetLane(hn::SumOfLanes(d, a3));
  for (; i < dim; ++i) {
    for (int j = 0; j < 4; ++j) out[j] += q[i] * k[j * stride + i];
  }
}

// acc = acc * rescale, then acc += p[t - t0] * v[t] for keys t in [b, e) in order, over dim
// floats. Each slice of the accumulator stays in registers for the whole tile (one load and
// one store per tile, not per key); the per-element operation order is unchanged by that.
HWY_INLINE void AccumulateTile(float* acc, float rescale, const float* p, const float* v,
                               int64_t kv_stride, int64_t t0, int64_t b, int64_t e, int dim) {
  const hn::ScalableTag<float> d;
  const int N = static_cast<int>(hn::Lanes(d));
  const auto vs = hn::Set(d, rescale);
  int i = 0;
  for (; i + 4 * N <= dim; i += 4 * N) {
    auto a0 = hn::Mul(hn::LoadU(d, acc + i), vs), a1 = hn::Mul(hn::LoadU(d, acc + i + N), vs);
    auto a2 = hn::Mul(hn::LoadU(d, acc + i + 2 * N), vs), a3 = hn::Mul(hn::LoadU(d, acc + i + 3 * N), vs);
    for (int64_t t = b; t < e; ++t) {
      const auto pt = hn::Set(d, p[t - t0]);
      const float* vt = v + t * kv_stride + i;
      a0 = hn::MulAdd(pt, hn::LoadU(d, vt), a0);
      a1 = hn::MulAdd(pt, hn::LoadU(d, vt + N), a1);
      a2 = hn::MulAdd(pt, hn::LoadU(d, vt + 2 * N), a2);
      a3 = hn::MulAdd(pt, hn::LoadU(d, vt + 3 * N), a3);
    }
    hn::StoreU(a0, d, acc + i);
    hn::StoreU(a1, d, acc + i + N);
    hn::StoreU(a2, d, acc + i + 2 * N);
    hn::StoreU(a3, d, acc + i + 3 * N);
  }
  for (; i + N <= dim; i += N) {
    auto a = hn::Mul(hn::LoadU(d, acc + i), vs);
    for (int64_t t = b; t < e; ++t) a = hn::MulAdd(hn::Set(d, p[t - t0]), hn::LoadU(d, v + t * kv_stride + i), a);
    hn::StoreU(a, d, acc + i);
  }
  for (; i < dim; ++i) {
    float a = acc[i] * rescale;
    for (int64_t t = b; t < e; ++t) a = a + p[t - t0] * v[t * kv_stride + i];
    acc[i] = a;
  }
}

// exp(s[j] - max) for the kKeyTile scores of a tile, vectorised (padding lanes are -inf -> 0).
HWY_INLINE void ExpShifted(float* s, float max) {
  const hn::ScalableTag<float> d;
  const int N = static_cast<int>(hn::Lanes(d));
  const auto vmax = hn::Set(d, max);
  int j = 0;
  for (; j + N <= kKeyTile; j += N) hn::StoreU(hn::Exp(d, hn::Sub(hn::LoadU(d, s + j), vmax)), d, s + j);
  for (; j < kKeyTile; ++j) s[j] = std::exp(s[j] - max);
}

struct RowState {
  float max;
  float sum;
};

void AttentionImpl(const float* q, int64_t M, int64_t q_stride, const AttentionShape& shape,
                   const float* k, const float* v, int64_t kv_stride, const int32_t* key_begin,
                   const int32_t* key_end, float* out, int64_t out_stride, ThreadPool& pool) {
  const int hd = shape.head_dim;
  const int group = shape.n_heads / shape.n_kv_heads;
  const int64_t row_blocks = (M + kQueryRowsPerTask - 1) / kQueryRowsPerTask;
  pool.ParallelFor(shape.n_kv_heads * row_blocks, [&](int64_t task) {
    const int kvh = static_cast<int>(task / row_blocks);
    const int64_t m0 = (task % row_blocks) * kQueryRowsPerTask;
    const int64_t m1 = std::min(M, m0 + kQueryRowsPerTask);
    const int64_t pairs = (m1 - m0) * group;  // (row, head) pairs of this task
    // Per-thread scratch: grows to the largest task once, then never allocates again.
    thread_local std::vector<float> acc_buf;
    thread_local std::vector<RowState> state_buf;
    if (acc_buf.size() < static_cast<size_t>(pairs * hd)) acc_buf.resize(pairs * hd);
    if (state_buf.size() < static_cast<size_t>(pairs)) state_buf.resize(pairs);
    float* acc = acc_buf.data();
    RowState* state = state_buf.data();
    std::fill(acc, acc + pairs * hd, 0.0f);
    int32_t lo = std::numeric_limits<int32_t>::max(), hi = 0;
    for (int64_t m = m0; m < m1; ++m) {
      if (key_end[m] > key_begin[m]) {
        lo = std::min(lo, key_begin[m]);
        hi = std::max(hi, key_end[m]);
      }
    }
    for (int64_t p = 0; p < pairs; ++p) state[p] = {-std::numeric_limits<float>::infinity(), 0.0f};

    alignas(64) float s[kKeyTile];
    const float* k_head = k + static_cast<int64_t>(kvh) * hd;
    const float* v_head = v + static_cast<int64_t>(kvh) * hd;
    for (int64_t t0 = (lo / kKeyTile) * kKeyTile; t0 < hi; t0 += kKeyTile) {
      for (int64_t m = m0; m < m1; ++m) {
        const int64_t b = std::max<int64_t>(key_begin[m], t0);
        const int64_t e = std::min<int64_t>(key_end[m], t0 + kKeyTile);
        if (b >= e) continue;
        for (int g = 0; g < group; ++g) {
          const int h = kvh * group + g;
          const float* qh = q + m * q_stride + static_cast<int64_t>(h) * hd;
          const int64_t pair = (m - m0) * group + g;
          float tile_max = -std::numeric_limits<float>::infinity();
          for (int j = 0; j < kKeyTile;) {
            const int64_t t = t0 + j;
            if (t >= b && t + 4 <= e && j + 4 <= kKeyTile) {
              Dot4(qh, k_head + t * kv_stride, kv_stride, hd, s + j);
              for (int i = 0; i < 4; ++i) s[j + i] *= shape.scale;
              j += 4;
            } else {
              s[j] = (t >= b && t < e) ? Dot(qh, k_head + t * kv_stride, hd) * shape.scale
                                       : -std::numeric_limits<float>::infinity();
              ++j;
            }
          }
          for (int j = 0; j < kKeyTile; ++j) tile_max = std::max(tile_max, s[j]);
          RowState& st = state[pair];
          const float new_max = std::max(st.max, tile_max);
          const float rescale = std::exp(st.max - new_max);  // 0 on the first tile
          ExpShifted(s, new_max);
          float tile_sum = 0.0f;
          for (int64_t t = b; t < e; ++t) tile_sum += s[t - t0];
          AccumulateTile(acc + pair * hd, rescale, s, v_head, kv_stride, t0, b, e, hd);
          st.sum = st.sum * rescale + tile_sum;
          st.max = new_max;
        }
      }
    }
    for (int64_t m = m0; m < m1; ++m) {
      for (int g = 0; g < group; ++g) {
        const int h = kvh * group + g;
        const int64_t pair = (m - m0) * group + g;
        float* o = out + m * out_stride + static_cast<int64_t>(h) * hd;
        const float inv = state[pair].sum > 0.0f ? 1.0f / state[pair].sum : 0.0f;
        for (int i = 0; i < hd; ++i) o[i] = acc[pair * hd + i] * inv;
      }
    }
  });
}

}  // namespace dflash::ops::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace dflash::ops {
HWY_EXPORT(AttentionImpl);

void Attention(const float* q, int64_t M, int64_t q_stride, const AttentionShape& shape,
               const float* k, const float* v, int64_t kv_stride, const int32_t* key_begin,
               const int32_t* key_end, float* out, int64_t out_stride, ThreadPool& pool) {
  if (shape.n_kv_heads <= 0 || shape.n_heads % shape.n_kv_heads != 0)
    Fail("Attention: ", shape.n_heads, " query heads do not group over ", shape.n_kv_heads,
         " key/value heads");
  HWY_DYNAMIC_DISPATCH(AttentionImpl)(q, M, q_stride, shape, k, v, kv_stride, key_begin, key_end,
                                      out, out_stride, pool);
}
}  // namespace dflash::ops
#endif
