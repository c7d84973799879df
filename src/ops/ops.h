// Compute kernels. They know shapes and dtypes, nothing about models.
//
// Every kernel is batch-invariant: the result for row m depends only on row m's inputs, never
// on how many rows are computed together, how work is split across threads, or which rows
// came before. Each output element is reduced in one fixed order. This is what makes a row
// computed in a 16-row verify bit-identical to the same row computed alone in decode, and
// so greedy speculative decoding bit-identical to plain decoding.
#pragma once

#include <cstdint>
#include <span>

#include "core/tensor.h"
#include "core/thread_pool.h"

namespace dflash::ops {

// y[m, n] = sum_k x[m, k] * W[n, k]  (+ bias[n] if bias), for m < M, n < W.rows.
// x: M x W.cols row-major f32; y: M x W.rows row-major f32. W in any supported dtype.
// Block-quantised W (Q8_0, Q4_0, Q4_K, Q6_K): each x row is first quantised to int8 blocks of
// 32 with an f32 scale (a function of that row alone, so still batch-invariant) and the block
// dot products are exact integers; see ops/matmul_quant.cc for the error this adds.
void MatMul(const float* x, int64_t M, const WeightRef& w, const float* bias, float* y,
            ThreadPool& pool);

// One product of MatMulShared: y = x · wᵀ (+ bias).
struct MatMulOutput {
  const WeightRef* w = nullptr;
  const float* bias = nullptr;
  float* y = nullptr;
};

// Several products of the same x (q, k and v; gate and up), each y exactly what MatMul gives.
// Block-quantised weights share one quantisation of x and one pass of the pool, so the pool
// waits once rather than once per weight. All weights have x's width.
void MatMulShared(const float* x, int64_t M, std::span<const MatMulOutput> outputs, ThreadPool& pool);

// y[r] = x[r] / rms(x[r]) * weight, for `rows` rows of `dim`; y may alias x.
void RmsNorm(const float* x, int64_t rows, int64_t dim, const float* weight, float eps, float* y);

// out[i] = silu(gate[i]) * up[i]; out may alias gate.
void SiluMul(const float* gate, const float* up, int64_t n, float* out);

// y[i] += x[i].
void AddInPlace(float* y, const float* x, int64_t n);

// Writes row `row` of W as f32 (embedding lookup, and the dequantisation reference).
// Block formats (Q8_0, Q4_0, Q4_K, Q6_K) decode bit-exactly as the gguf package does.
void DequantizeRow(const WeightRef& w, int64_t row, float* out);

// Quantises `cols` f32 values (whole blocks) to Q8_0, Q4_0 or Q4_K blocks at `out`
// (RowBytes(to, cols) bytes); Q8_0 and Q4_0 bit-exactly as the gguf package's quantize(),
// Q4_K with a min/max fit (see ops/quantize.cc).
void QuantizeRow(const float* x, int64_t cols, DType to, uint8_t* out);

struct AttentionShape {
  int n_heads = 0;     // query heads
  int n_kv_heads = 0;  // key/value heads (GQA: n_heads % n_kv_heads == 0)
  int head_dim = 0;
  float scale = 1.0f;  // softmax scale, usually 1/sqrt(head_dim)
};

// Keys and values as a cache stores them: head_dim elements of `type` (kF32, kF16 or kBF16)
// per KV head and position; one head's positions `stride` elements apart, and consecutive KV
// heads `head_stride` elements apart (0: head_dim, the heads side by side in one row per
// position). `tiled` is the target's layout, in the order attention's loops read it, so they
// read it in place: each head's keys in tiles of kKvTile positions, dim-major inside a tile,
// and its values position by position (stride head_dim; head_stride a multiple of kKvTile *
// head_dim). A tiled bf16 cache (even head_dim) pairs what one bf16 dot product multiplies: a
// key's dims 2i and 2i + 1 side by side inside its tile, and a dim's values at positions 2p
// and 2p + 1 (TiledKeyOffset, TiledValueOffset). Each element is rounded once, when it is
// stored (StoreKv, StoreKeyTiled, StoreValueTiled); attention reads f32 and f16 caches, and
// bf16 ones on CPUs without bf16 dot products, as the exact f32 values. With them
// (Bf16DotActive), a bf16 cache is attended with bf16 dot products: queries and softmax
// weights are rounded to bf16 too, as a bf16 transformers model computes attention.
struct KvView {
  const void* k = nullptr;
  const void* v = nullptr;
  int64_t stride = 0;
  DType type = DType::kF32;
  int64_t head_stride = 0;
  bool tiled = false;
};

// Positions per key tile; element i of position p in one head's tiled keys and values.
constexpr int kKvTile = 32;
inline int64_t TiledKeyOffset(int64_t p, int64_t i, int64_t head_dim, DType type) {
  const int64_t tile = p / kKvTile * head_dim * kKvTile, j = p % kKvTile;
  if (type == DType::kBF16) return tile + (i / 2 * kKvTile + j) * 2 + i % 2;
  return tile + i * kKvTile + j;
}
inline int64_t TiledValueOffset(int64_t p, int64_t i, int64_t head_dim, DType type) {
  if (type == DType::kBF16) return (p / 2 * head_dim + i) * 2 + p % 2;
  return p * head_dim + i;
}

// Whether attention uses bf16 dot products for bf16 caches: allowed by default on AMD (Zen 5 measured faster) and
// with AMX-BF16 (tiles compute them where head_dim % 32 == 0: Sapphire Rapids measured faster, bench/README.md);
// DFLASH_BF16_DOT=0 / =1 or SetBf16DotAllowed override that.
bool Bf16DotActive();
bool Bf16DotAllowed();
void SetBf16DotAllowed(bool allowed);

// Scaled dot-product attention for M query rows.
// q:   M rows of n_heads*head_dim (row stride q_stride floats).
// kv:  the key/value rows.
// Row m attends to keys [key_begin[m], key_end[m]) (a contiguous range covers causal,
// bidirectional and sliding-window masks). out: M rows of n_heads*head_dim, out_stride apart.
void Attention(const float* q, int64_t M, int64_t q_stride, const AttentionShape& shape,
               const KvView& kv, const int32_t* key_begin, const int32_t* key_end, float* out,
               int64_t out_stride, ThreadPool& pool);

// The same over f32 rows kv_stride floats apart.
void Attention(const float* q, int64_t M, int64_t q_stride, const AttentionShape& shape,
               const float* k, const float* v, int64_t kv_stride, const int32_t* key_begin,
               const int32_t* key_end, float* out, int64_t out_stride, ThreadPool& pool);

// Fails naming `what` unless type is a KV element type (kF32, kF16, kBF16).
void CheckKvType(DType type, const char* what);

// Writes n f32 values as `type` (kF32, kF16 or kBF16, round to nearest even) to out: how a
// KV cache stores a new position. Each element is rounded on its own, so it is batch-invariant.
void StoreKv(const float* x, int64_t n, DType type, void* out);

// Write one position's head_dim f32 values as `type`, rounded as StoreKv rounds them, at
// position p of one head's tiled keys or values (KvView::tiled).
void StoreKeyTiled(const float* x, int head_dim, DType type, int64_t p, void* head);
void StoreValueTiled(const float* x, int head_dim, DType type, int64_t p, void* head);

// The name of the SIMD target chosen at run time (e.g. "AVX3_ZEN4"), for reports.
const char* SimdTargetName();

}  // namespace dflash::ops
