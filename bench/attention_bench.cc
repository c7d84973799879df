// Attention over a long KV cache (kv: 0 = f32, 1 = f16, 3 = bf16, laid out as the target caches
// them; 2 = f32 rows, position-major, as the DFlash draft caches its context) at Qwen3-0.6B head shapes
// (16 query heads, 8 KV heads, head_dim 128), for 1 query row (decode) and 16 (a DFlash verify
// block): the verify should cost far less than 16 decodes because every K/V tile is loaded
// once for all rows.
//   DFLASH_THREADS=2 build/bin/dflash_microbench --benchmark_filter=Attention
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <vector>

#include "core/thread_pool.h"
#include "ops/ops.h"

namespace dflash {
namespace {

ThreadPool& Pool() {
  static ThreadPool pool(std::getenv("DFLASH_THREADS") ? std::atoi(std::getenv("DFLASH_THREADS")) : 0);
  return pool;
}

void BM_Attention(benchmark::State& state) {
  const int64_t M = state.range(0), ctx = state.range(1);
  const int layout = static_cast<int>(state.range(2));  // 0, 1, 3: f32, f16, bf16 as the target caches; 2: the draft's
  const DType type = layout == 1 ? DType::kF16 : layout == 3 ? DType::kBF16 : DType::kF32;
  const size_t elem = type == DType::kF32 ? 4 : 2;
  const ops::AttentionShape shape{16, 8, 128, 0.08838834764f};
  const int64_t q_dim = 16 * 128, kv_dim = 8 * 128, keys = ctx + M;
  std::vector<float> q(M * q_dim), k(keys * kv_dim), v(keys * kv_dim), out(M * q_dim);
  for (size_t i = 0; i < q.size(); ++i) q[i] = static_cast<float>((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
  for (size_t i = 0; i < k.size(); ++i) {
    k[i] = static_cast<float>((i * 40503u) % 1000) / 1000.0f - 0.5f;
    v[i] = static_cast<float>((i * 69069u) % 1000) / 1000.0f - 0.5f;
  }
  // Head-major with tiled keys, as the target's cache lays it out (the values are synthetic
  // either way): head h's positions from element h * positions * 128.
  const int64_t positions = (keys + ops::kKvTile - 1) / ops::kKvTile * ops::kKvTile;
  std::vector<uint8_t> k_store(8 * positions * 128 * elem), v_store(8 * positions * 128 * elem);
  for (int64_t h = 0; h < 8; ++h) {
    for (int64_t p = 0; p < keys; ++p) {
      const float* x = k.data() + (h * keys + p) * 128;
      ops::StoreKeyTiled(x, 128, type, p, k_store.data() + h * positions * 128 * elem);
      ops::StoreValueTiled(v.data() + (h * keys + p) * 128, 128, type, p, v_store.data() + h * positions * 128 * elem);
    }
  }
  const ops::KvView target_kv{k_store.data(), v_store.data(), 128, type, positions * 128, /*tiled=*/true};
  // The draft's cache: f32 rows, position-major (k and v read as [keys][kv_dim]).
  const ops::KvView kv = layout == 2 ? ops::KvView{k.data(), v.data(), kv_dim, DType::kF32} : target_kv;
  std::vector<int32_t> begin(M, 0), end(M);
  for (int64_t m = 0; m < M; ++m) end[m] = static_cast<int32_t>(ctx + m + 1);  // causal
  for (auto _ : state) {
    ops::Attention(q.data(), M, q_dim, shape, kv, begin.data(), end.data(), out.data(), q_dim, Pool());
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["KV GB/s"] = benchmark::Counter(static_cast<double>(2 * keys * kv_dim * elem) / 1e9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(ops::SimdTargetName()) + " threads=" + std::to_string(Pool().size()));
}
BENCHMARK(BM_Attention)->ArgsProduct({{1, 16}, {512, 4096, 16384}, {0, 1, 2, 3}})->ArgNames({"rows", "ctx", "kv"})
    ->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace dflash
