// MLX affine weights (mlx-lm layout): dequantisation bit-exact against mx.dequantize, MatMul
// against mx.quantized_matmul and an f64 reference, batch-invariant on every SIMD target, and
// MLX-quantised Qwen3 directories against transformers running mx.dequantize'd weights.
// tools/make_mlx_fixtures.py wrote every fixture and golden with the mlx package.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <vector>

#include "core/thread_pool.h"
#include "hwy/targets.h"
#include "io/json_file.h"
#include "io/mlx_quantized.h"
#include "io/safetensors.h"
#include "model/qwen3.h"
#include "ops/mlx_affine.h"
#include "ops/ops.h"
#include "spec/engine.h"

namespace dflash {
namespace {

namespace fs = std::filesystem;

const fs::path kTests = fs::path(DFLASH_SOURCE_DIR) / "tests";
const fs::path kGoldens = kTests / "goldens" / "mlx";

const Json& Manifest() {
  static const Json m = ReadJsonFile((kGoldens / "manifest.json").string());
  return m;
}

std::vector<float> F32(const TensorStore& s, const std::string& name) {
  const Tensor* t = s.Find(name);
  if (!t || t->dtype != DType::kF32) throw Error("golden tensor '" + name + "' missing or not F32");
  const auto* p = reinterpret_cast<const float*>(t->data);
  return std::vector<float>(p, p + t->numel());
}

std::vector<int32_t> I32(const TensorStore& s, const std::string& name) {
  const Tensor* t = s.Find(name);
  if (!t || t->dtype != DType::kI32) throw Error("golden tensor '" + name + "' missing or not I32");
  const auto* p = reinterpret_cast<const int32_t*>(t->data);
  return std::vector<int32_t>(p, p + t->numel());
}

// dequant.safetensors with every case repacked under its own (bits, group size).
TensorStore DequantGoldens() {
  TensorStore store("dequant.safetensors");
  AddSafetensorsFile((kGoldens / "dequant.safetensors").string(), store);
  Json config{{"quantization", {{"group_size", 64}, {"bits", 4}}}};
  for (const Json& c : Manifest()["dequant"]["cases"]) {
    config["quantization"][c["key"].get<std::string>()] = {{"group_size", c["group_size"]}, {"bits", c["bits"]}};
  }
  EXPECT_EQ(RepackMlxQuantized(config, "<test config>", store), static_cast<int>(Manifest()["dequant"]["cases"].size()));
  return store;
}

std::vector<int64_t> Targets() { return hwy::SupportedAndGeneratedTargets(); }

struct TargetScope {
  explicit TargetScope(int64_t t) { hwy::SetSupportedTargetsForTest(t); }
  ~TargetScope() { hwy::SetSupportedTargetsForTest(0); }
};

TEST(MlxGoldens, ScalesKeepTheirStoredDtype) {
  TensorStore raw("dequant.safetensors");
  AddSafetensorsFile((kGoldens / "dequant.safetensors").string(), raw);
  for (const Json& c : Manifest()["dequant"]["cases"]) {
    const std::string key = c["key"];
    const DType want = c["scales"] == "bfloat16" ? DType::kBF16 : c["scales"] == "float16" ? DType::kF16 : DType::kF32;
    EXPECT_EQ(raw.Find(key + ".scales")->dtype, want) << key;
    EXPECT_EQ(raw.Find(key + ".weight")->dtype, DType::kU32) << key;
  }
}

TEST(MlxGoldens, DequantizeRowMatchesMlxBitForBit) {
  const TensorStore store = DequantGoldens();
  const int64_t rows = Manifest()["dequant"]["rows"], cols = Manifest()["dequant"]["cols"];
  for (const Json& c : Manifest()["dequant"]["cases"]) {
    const std::string key = c["key"];
    const Tensor& t = store.Require(key + ".weight", {rows, cols});
    ASSERT_TRUE(mlx::IsMlxAffine(t.dtype)) << key;
    ASSERT_EQ(BlockElems(t.dtype), c["group_size"].get<int64_t>()) << key;
    ASSERT_EQ(mlx::Bits(t.dtype), c["bits"].get<int>()) << key;
    const WeightRef w = AsWeight(t);
    const std::vector<float> want = F32(store, key + ".dequant");
    std::vector<float> got(cols);
    for (int64_t r = 0; r < rows; ++r) {
      ops::DequantizeRow(w, r, got.data());
      for (int64_t i = 0; i < cols; ++i) {
        ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[r * cols + i]))
            << key << " row " << r << " col " << i << ": " << got[i] << " vs " << want[r * cols + i];
      }
    }
    EXPECT_EQ(store.Find(key + ".scales"), nullptr) << key << ": scales should be folded into the blocks";
  }
}

// mx.quantized_matmul sums in its own order; both are f32 sums of the same products, so they
// differ by f32 rounding: |err| <= 2 K eps sum_k |x_k w_k| (we allow 4 K eps).
TEST(MlxGoldens, MatMulMatchesMlxQuantizedMatmul) {
  const TensorStore store = DequantGoldens();
  const int64_t rows = Manifest()["dequant"]["rows"], cols = Manifest()["dequant"]["cols"];
  const std::vector<float> x = F32(store, "x");
  const int64_t M = static_cast<int64_t>(x.size()) / cols;
  ThreadPool pool(2);
  for (const Json& c : Manifest()["dequant"]["cases"]) {
    const std::string key = c["key"];
    const WeightRef w = AsWeight(*store.Find(key + ".weight"));
    const std::vector<float> want = F32(store, key + ".matmul");  // [M][rows]
    const std::vector<float> wf = F32(store, key + ".dequant");
    for (int64_t target : Targets()) {
      TargetScope scope(target);
      std::vector<float> y(M * rows);
      ops::MatMul(x.data(), M, w, nullptr, y.data(), pool);
      for (int64_t m = 0; m < M; ++m) {
        for (int64_t n = 0; n < rows; ++n) {
          double mag = 0;
          for (int64_t k = 0; k < cols; ++k) mag += std::fabs(double(x[m * cols + k]) * wf[n * cols + k]);
          EXPECT_LE(std::fabs(y[m * rows + n] - want[m * rows + n]), 4 * cols * 1.2e-7 * mag + 1e-30)
              << key << " on " << hwy::TargetName(target) << " m=" << m << " n=" << n;
        }
      }
    }
  }
}

// Random blocks: codes and every other byte random, finite scales and biases.
std::vector<uint8_t> RandomBlocks(DType t, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> bytes(rows * RowBytes(t, cols));
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  std::normal_distribution<float> dist(0.0f, 0.01f);
  for (size_t off = 0; off < bytes.size(); off += BlockBytes(t)) {
    const float scale = dist(rng), bias = -8 * scale + dist(rng);
    std::memcpy(bytes.data() + off + mlx::kScaleOffset, &scale, 4);
    std::memcpy(bytes.data() + off + mlx::kBiasOffset, &bias, 4);
  }
  return bytes;
}

class MlxMatMulTest : public ::testing::TestWithParam<DType> {};

// Against an f64 sum of x times DequantizeRow's values (exact inputs, so only f32 rounding of
// the sum differs: 4 K eps sum |x w|), and the same bits for every sub-batch of rows.
TEST_P(MlxMatMulTest, MatchesDequantizedReferenceAndIsBatchInvariant) {
  const DType t = GetParam();
  const int64_t group = BlockElems(t);
  ThreadPool pool(2);
  for (int64_t K : {group, 3 * group, int64_t{512}}) {
    for (int64_t N : {1, 5, 19}) {
      const std::vector<uint8_t> bytes = RandomBlocks(t, N, K, static_cast<uint32_t>(K * 7 + N));
      const WeightRef w{bytes.data(), t, N, K, RowBytes(t, K)};
      std::vector<float> wf(N * K);
      for (int64_t n = 0; n < N; ++n) ops::DequantizeRow(w, n, wf.data() + n * K);
      const int64_t M = 17;
      std::mt19937 rng(static_cast<uint32_t>(K + N));
      std::normal_distribution<float> dist(0.0f, 1.0f);
      std::vector<float> x(M * K), bias(N);
      for (float& v : x) v = dist(rng);
      for (float& v : bias) v = dist(rng);
      for (int64_t target : Targets()) {
        TargetScope scope(target);
        const char* tname = hwy::TargetName(target);
        std::vector<float> y_all(M * N);
        ops::MatMul(x.data(), M, w, bias.data(), y_all.data(), pool);
        for (int64_t m = 0; m < M; ++m) {
          for (int64_t n = 0; n < N; ++n) {
            double ref = bias[n], mag = std::fabs(bias[n]);
            for (int64_t k = 0; k < K; ++k) {
              ref += double(x[m * K + k]) * wf[n * K + k];
              mag += std::fabs(double(x[m * K + k]) * wf[n * K + k]);
            }
            ASSERT_LE(std::fabs(y_all[m * N + n] - ref), 4 * K * 1.2e-7 * mag + 1e-30)
                << tname << " K=" << K << " N=" << N << " m=" << m << " n=" << n;
          }
        }
        for (int64_t rows : {1, 2, 3, 4, 5, 16}) {
          std::vector<float> y(rows * N);
          for (int64_t m0 = 0; m0 + rows <= M; m0 += rows) {
            ops::MatMul(x.data() + m0 * K, rows, w, bias.data(), y.data(), pool);
            for (int64_t i = 0; i < rows * N; ++i)
              ASSERT_EQ(y[i], y_all[m0 * N + i]) << tname << " rows=" << rows << " m0=" << m0 << " K=" << K;
          }
        }
      }
      ThreadPool three(3);
      std::vector<float> y2(M * N), y3(M * N);
      ops::MatMul(x.data(), M, w, nullptr, y2.data(), pool);
      ops::MatMul(x.data(), M, w, nullptr, y3.data(), three);
      ASSERT_EQ(y2, y3) << "thread count changed bits, K=" << K << " N=" << N;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, MlxMatMulTest,
                         ::testing::Values(DType::kMlx4G32, DType::kMlx4G64, DType::kMlx4G128,
                                           DType::kMlx8G32, DType::kMlx8G64, DType::kMlx8G128),
                         [](const auto& info) { return std::string(DTypeName(info.param)); });

// A store with one MLX triple; `mutate` breaks it in one way.
struct Triple {
  std::vector<uint32_t> words = std::vector<uint32_t>(4 * 8, 0x76543210u);  // 4 rows x 64 columns at 4 bits
  std::vector<uint16_t> scales = std::vector<uint16_t>(4, F32ToBF16(0.5f));
  std::vector<uint16_t> biases = std::vector<uint16_t>(4, F32ToBF16(-1.0f));
  TensorStore store{"<triple>"};
  void Add(const std::string& name, DType t, std::vector<int64_t> shape, const void* data, size_t bytes) {
    Tensor x;
    x.name = name;
    x.dtype = t;
    x.shape = std::move(shape);
    x.data = static_cast<const uint8_t*>(data);
    x.nbytes = bytes;
    store.Add(std::move(x));
  }
  explicit Triple(bool with_biases = true, std::vector<int64_t> scale_shape = {4, 1}) {
    Add("m.weight", DType::kU32, {4, 8}, words.data(), words.size() * 4);
    Add("m.scales", DType::kBF16, scale_shape, scales.data(), scales.size() * 2);
    if (with_biases) Add("m.biases", DType::kBF16, {4, 1}, biases.data(), biases.size() * 2);
  }
};

Json Quant(Json q) { return Json{{"quantization", std::move(q)}}; }

TEST(MlxLoader, RepacksATripleAndKeepsItsValues) {
  Triple t;
  ASSERT_EQ(RepackMlxQuantized(Quant({{"group_size", 64}, {"bits", 4}}), "cfg", t.store), 1);
  const Tensor& w = t.store.Require("m.weight", {4, 64});
  EXPECT_EQ(w.dtype, DType::kMlx4G64);
  EXPECT_EQ(t.store.Find("m.scales"), nullptr);
  EXPECT_EQ(t.store.Find("m.biases"), nullptr);
  std::vector<float> row(64);
  ops::DequantizeRow(AsWeight(w), 2, row.data());
  for (int e = 0; e < 64; ++e) EXPECT_EQ(row[e], 0.5f * (e % 8) - 1.0f) << e;  // word 0x76543210: q = e % 8
  EXPECT_EQ(RepackMlxQuantized(Json::object(), "cfg", t.store), 0);  // no "quantization": untouched
}

// mlx-lm writes an entry per module, with "group_size": null meaning the default.
TEST(MlxLoader, PerModuleEntriesWithNullGroupSizeUseTheDefault) {
  Triple t;
  const Json q = Quant({{"group_size", 64}, {"bits", 4}, {"m", {{"group_size", nullptr}, {"bits", 4}, {"mode", "affine"}}}});
  ASSERT_EQ(RepackMlxQuantized(q, "cfg", t.store), 1);
  EXPECT_EQ(t.store.Find("m.weight")->dtype, DType::kMlx4G64);
}

TEST(MlxLoader, RejectsWhatItCannotRun) {
  {
    Triple t;  // 3-bit and 2-bit words do not split into whole bytes per element
    EXPECT_THROW(RepackMlxQuantized(Quant({{"group_size", 64}, {"bits", 3}}), "cfg", t.store), Error);
  }
  {
    Triple t;
    EXPECT_THROW(RepackMlxQuantized(Quant({{"group_size", 16}, {"bits", 4}}), "cfg", t.store), Error);
  }
  {
    Triple t;
    EXPECT_THROW(RepackMlxQuantized(Quant({{"group_size", 64}, {"bits", 4}, {"mode", "mxfp4"}}), "cfg", t.store), Error);
  }
  {
    Triple t(/*with_biases=*/false);
    EXPECT_THROW(RepackMlxQuantized(Quant({{"group_size", 64}, {"bits", 4}}), "cfg", t.store), Error);
  }
  {
    Triple t(true, {4, 2});  // scales for groups of 32, config says 64
    EXPECT_THROW(RepackMlxQuantized(Quant({{"group_size", 64}, {"bits", 4}}), "cfg", t.store), Error);
  }
  {
    Triple t;  // the words read as 8-bit are 32 columns: one group of 32, not [4, 1] of 64
    EXPECT_THROW(RepackMlxQuantized(Quant({{"group_size", 64}, {"bits", 8}}), "cfg", t.store), Error);
  }
  {
    Triple t;
    EXPECT_THROW(RepackMlxQuantized(Quant({{"group_size", 64}, {"bits", 4}, {"m", false}}), "cfg", t.store), Error);
  }
  {
    Triple t;
    EXPECT_THROW(RepackMlxQuantized(Quant({{"group_size", 64}, {"bits", 4}, {"m", 7}}), "cfg", t.store), Error);
  }
  {
    Triple t;
    EXPECT_THROW(RepackMlxQuantized(Quant("four bits"), "cfg", t.store), Error);
  }
  {
    TensorStore s("<orphan>");  // U32 words with no scales at all
    std::vector<uint32_t> words(8);
    Tensor x;
    x.name = "m.weight";
    x.dtype = DType::kU32;
    x.shape = {1, 8};
    x.data = reinterpret_cast<const uint8_t*>(words.data());
    x.nbytes = 32;
    s.Add(std::move(x));
    EXPECT_THROW(RepackMlxQuantized(Quant({{"group_size", 64}, {"bits", 4}}), "cfg", s), Error);
  }
}

class MlxTarget : public ::testing::TestWithParam<std::string> {};

std::vector<std::string> TargetNames() {
  std::vector<std::string> names;
  for (auto it = Manifest()["targets"].begin(); it != Manifest()["targets"].end(); ++it) names.push_back(it.key());
  return names;
}

// transformers ran the mx.dequantize'd weights in f32; we run the packed ones in f32. Only
// summation order differs, so the tolerance is golden_test's 2e-4 (worst measured here: 6e-6).
TEST_P(MlxTarget, LogitsAndHiddenStatesMatchTransformersOnDequantizedWeights) {
  const std::string name = GetParam();
  const std::string dir = (kTests / "fixtures" / name).string();
  TensorStore golden(name);
  AddSafetensorsFile((kGoldens / Manifest()["targets"][name]["golden"].get<std::string>()).string(), golden);
  const TargetConfig cfg = LoadTargetConfig(dir);
  const TensorStore store = LoadSafetensorsDir(dir);
  EXPECT_TRUE(mlx::IsMlxAffine(store.Find("model.embed_tokens.weight")->dtype)) << name;
  const DecoderConfig& d = cfg.decoder;
  TargetOptions opt;
  opt.kv_capacity = 128;
  for (int l = 0; l < d.num_layers; ++l) opt.capture_layers.push_back(l);
  ThreadPool pool(2);
  Qwen3Model model(cfg, store, opt, pool);
  const Json& prompts = Manifest()["prompts"];
  for (size_t p = 0; p < prompts.size(); ++p) {
    const std::string key = "prompt" + std::to_string(p);
    const std::vector<int32_t> ids = I32(golden, key + ".ids");
    const std::vector<float> logits = F32(golden, key + ".logits");
    const std::vector<float> hidden = F32(golden, key + ".hidden");
    const size_t T = ids.size(), V = d.vocab_size, H = d.hidden_size;
    model.Truncate(0);
    model.Forward(ids, /*all_logits=*/true);
    float worst_logit = 0, worst_hidden = 0;
    for (size_t t = 0; t < T; ++t) {
      for (size_t v = 0; v < V; ++v) worst_logit = std::max(worst_logit, std::fabs(model.Logits(t)[v] - logits[t * V + v]));
      for (int l = 0; l < d.num_layers; ++l) {
        const float* ref = &hidden[((l + 1) * T + t) * H];
        for (size_t h = 0; h < H; ++h) worst_hidden = std::max(worst_hidden, std::fabs(model.Features(t)[l * H + h] - ref[h]));
      }
    }
    EXPECT_LT(worst_logit, 2e-4f) << name << " " << key << " logits";
    EXPECT_LT(worst_hidden, 2e-4f) << name << " " << key << " hidden states";
  }
}

TEST_P(MlxTarget, GreedyContinuationMatchesTransformersGenerate) {
  const std::string name = GetParam();
  TensorStore golden(name);
  AddSafetensorsFile((kGoldens / Manifest()["targets"][name]["golden"].get<std::string>()).string(), golden);
  EngineOptions eo;
  eo.target_dir = (kTests / "fixtures" / name).string();
  eo.context = 128;
  eo.kv_type = DType::kF32;  // the goldens are f32 transformers runs
  eo.prefill_chunk = 3;
  Engine engine(eo);
  GenerateOptions go;
  go.max_new_tokens = static_cast<int>(I32(golden, "greedy").size());
  go.ignore_stop = true;
  go.block_size = 1;
  EXPECT_EQ(engine.Generate(I32(golden, "prompt1.ids"), go).tokens, I32(golden, "greedy")) << name;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, MlxTarget, ::testing::ValuesIn(TargetNames()),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& c : s) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return s;
                         });

}  // namespace
}  // namespace dflash
