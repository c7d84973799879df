// MatMul throughput per weight dtype at Qwen3-0.6B shapes, for the row counts that matter:
// M=1 (decode: bound by streaming the weights, so GB/s of weights is the figure of merit),
// M=4 and M=16 (DFlash verify blocks: t(16)/t(1) is the verify cost). BF16dot: BF16 weights
// with bf16-rounded activations (native bf16 dot products where the CPU has them).
//   DFLASH_THREADS=1 build/bin/dflash_microbench --benchmark_filter=MatMul/Q4_0 --benchmark_min_time=0.5
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "bench/bandwidth.h"
#include "core/dtype.h"
#include "core/huge_pages.h"
#include "core/thread_pool.h"
#include "ops/ops.h"
#include "ops/weight_pack.h"

namespace dflash {
namespace {

struct Shape {
  int64_t rows, cols;
};
constexpr Shape kShapes[] = {{1024, 1024}, {3072, 1024}, {1024, 3072}, {151936, 1024}};
constexpr DType kDtypes[] = {DType::kF32, DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ6_K};

// DFLASH_THREADS=N fixes the pool size (default: one thread per hardware thread).
ThreadPool& Pool() {
  static ThreadPool pool(std::getenv("DFLASH_THREADS") ? std::atoi(std::getenv("DFLASH_THREADS")) : 0);
  return pool;
}

// Weights stay allocated across benchmarks of the same dtype and shape (the vocabulary matrix
// is large to build). Values: a cheap LCG, f32 in [-0.05, 0.05), quantised where needed; the
// K-quants get random blocks with small finite scales.
const ByteBuffer& Weights(DType t, Shape s) {
  static std::map<std::pair<int, int64_t>, std::unique_ptr<ByteBuffer>> cache;
  auto& slot = cache[{static_cast<int>(t), s.rows * 1000003 + s.cols}];
  if (slot) return *slot;
  slot = std::make_unique<ByteBuffer>(s.rows * RowBytes(t, s.cols));
  uint32_t state = 12345;
  auto next = [&] { return state = state * 1664525u + 1013904223u; };
  std::vector<float> row(s.cols);
  for (int64_t r = 0; r < s.rows; ++r) {
    uint8_t* dst = slot->data() + r * RowBytes(t, s.cols);
    for (float& v : row) v = (static_cast<float>(next() >> 8) / 16777216.0f - 0.5f) * 0.1f;
    switch (t) {
      case DType::kF32: std::memcpy(dst, row.data(), s.cols * 4); break;
      case DType::kBF16:
        for (int64_t i = 0; i < s.cols; ++i) {
          const uint16_t h = F32ToBF16(row[i]);
          std::memcpy(dst + 2 * i, &h, 2);
        }
        break;
      case DType::kQ8_0:
      case DType::kQ4_0: ops::QuantizeRow(row.data(), s.cols, t, dst); break;
      default: {
        for (size_t i = 0; i < RowBytes(t, s.cols); ++i) dst[i] = static_cast<uint8_t>(next() >> 24);
        const uint16_t d = F32ToF16(0.001f);
        for (size_t b = 0; b < RowBytes(t, s.cols); b += BlockBytes(t)) {
          std::memcpy(dst + b + (t == DType::kQ6_K ? 208 : 0), &d, 2);
          if (t == DType::kQ4_K) std::memcpy(dst + b + 2, &d, 2);
        }
      }
    }
  }
  if (ops::HasPackedLayout(t)) {  // MatMul reads block formats in the layout PackMatrices makes
    auto packed = std::make_unique<ByteBuffer>(ops::PackedBytes(t, s.rows, s.cols));
    ops::PackWeight(WeightRef{slot->data(), t, s.rows, s.cols, RowBytes(t, s.cols)}, packed->data(), Pool());
    slot = std::move(packed);
  }
  return *slot;
}

void BM_MatMul(benchmark::State& state, DType t, Shape s, bool bf16_dot) {
  const int64_t M = state.range(0);
  const ByteBuffer& bytes = Weights(t, s);
  WeightRef w{bytes.data(), t, s.rows, s.cols, RowBytes(t, s.cols)};
  w.bf16_activations = bf16_dot;
  if (ops::HasPackedLayout(t)) w.layout = WeightLayout::kGroups16;
  std::vector<float> x(M * s.cols), y(M * s.rows);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 2654435761u) % 1000) / 500.0f - 1.0f;
  for (auto _ : state) {
    ops::MatMul(x.data(), M, w, nullptr, y.data(), Pool());
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(bytes.size()) / 1e9,
                                              benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GMAC/s"] = benchmark::Counter(static_cast<double>(M * s.rows * s.cols) / 1e9,
                                                benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(ops::SimdTargetName()) + " threads=" + std::to_string(Pool().size()));
}

// One row through the seven matrices of every Qwen3-0.6B decoder layer in order (q, k, v, o,
// gate, up, down; 28 layers), each layer's weights a separate copy in one huge-page arena as
// PackMatrices lays a model out, so every matrix is read from DRAM as in decode rather than
// from cache as in BM_MatMul: GB/s here is what the layer matrices of a decode step achieve,
// startup and hand-off between small matrices included.
void BM_DecodeLayers(benchmark::State& state, DType t) {
  constexpr int kLayers = 28;
  constexpr Shape kLayer[] = {{2048, 1024}, {1024, 1024}, {1024, 1024}, {1024, 2048},
                              {3072, 1024}, {3072, 1024}, {1024, 3072}};
  size_t layer_bytes = 0;
  for (Shape s : kLayer) layer_bytes += Weights(t, s).size();
  static std::map<int, std::unique_ptr<HugeBuffer>> arenas;
  auto& arena = arenas[static_cast<int>(t)];
  const bool fresh = !arena;  // Google Benchmark runs this setup again for each measurement
  if (fresh) arena = std::make_unique<HugeBuffer>(kLayers * layer_bytes);
  std::vector<WeightRef> refs;
  size_t offset = 0;
  for (int l = 0; l < kLayers; ++l) {
    for (Shape s : kLayer) {
      const ByteBuffer& bytes = Weights(t, s);
      if (fresh) std::memcpy(arena->data() + offset, bytes.data(), bytes.size());
      WeightRef w{arena->data() + offset, t, s.rows, s.cols, RowBytes(t, s.cols)};
      if (ops::HasPackedLayout(t)) w.layout = WeightLayout::kGroups16;
      refs.push_back(w);
      offset += bytes.size();
    }
  }
  std::vector<float> x(3072, 0.01f), y(3072);
  for (auto _ : state) {
    for (const WeightRef& w : refs) ops::MatMul(x.data(), 1, w, nullptr, y.data(), Pool());
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(offset) / 1e9,
                                              benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(ops::SimdTargetName()) + " threads=" + std::to_string(Pool().size()));
}

// The roofline DecodeLayers is judged against: the read probe `dflash bench --roofline` uses.
void BM_ReadBandwidth(benchmark::State& state) {
  double gbs = 0;
  for (auto _ : state) gbs = MeasureReadBandwidth(Pool(), int64_t{512} << 20, 5).median_gbs;
  state.counters["GB/s"] = gbs;
}
BENCHMARK(BM_ReadBandwidth)->Iterations(1)->Unit(benchmark::kMillisecond);

const bool kRegistered = [] {
  for (DType t : {DType::kQ8_0, DType::kQ4_K}) {
    const std::string name = "DecodeLayers/" + std::string(DTypeName(t));
    benchmark::RegisterBenchmark(name.c_str(), BM_DecodeLayers, t)->UseRealTime()->Unit(benchmark::kMillisecond);
  }
  for (DType t : kDtypes) {
    for (bool bf16_dot : {false, true}) {
      if (bf16_dot && t != DType::kBF16) continue;
      for (Shape s : kShapes) {
        const std::string name = "MatMul/" + std::string(DTypeName(t)) + (bf16_dot ? "dot" : "") + "/" +
                                 std::to_string(s.rows) + "x" + std::to_string(s.cols);
        benchmark::RegisterBenchmark(name.c_str(), BM_MatMul, t, s, bf16_dot)
            ->Arg(1)->Arg(4)->Arg(8)->Arg(16)->UseRealTime()->Unit(benchmark::kMicrosecond);
      }
    }
  }
  return true;
}();

}  // namespace
}  // namespace dflash
