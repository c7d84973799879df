// The GGUF reader against a tiny Qwen3 file written by the gguf package
// (tools/make_gguf_fixture.py): metadata, config, names, shapes, types and tensor data as gguf
// itself decodes them; a model bound to it runs batch-invariantly; damaged files are errors.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/thread_pool.h"
#include "io/gguf.h"
#include "io/quantize_store.h"
#include "model/gguf_config.h"
#include "model/qwen3.h"
#include "ops/ops.h"

namespace dflash {
namespace {

const std::string kDir = std::string(DFLASH_SOURCE_DIR) + "/tests/goldens/gguf/";
const std::string kFile = kDir + "qwen3-tiny.gguf";

TEST(Gguf, ReadsMetadataConfigAndTensorsAsGgufDoes) {
  const Json want = ReadJsonFile(kDir + "qwen3-tiny.json");
  const GgufModel model = LoadGguf(kFile);
  EXPECT_EQ(model.metadata["general.architecture"], "qwen3");
  EXPECT_EQ(model.metadata["tokenizer.ggml.eos_token_id"], want["config"]["eos_token_id"]);
  const TargetConfig cfg = TargetConfigFromGguf(model, kFile);
  const Json& c = want["config"];
  EXPECT_EQ(cfg.architecture, "Qwen3ForCausalLM");
  EXPECT_EQ(cfg.decoder.vocab_size, c["vocab_size"]);
  EXPECT_EQ(cfg.decoder.hidden_size, c["hidden_size"]);
  EXPECT_EQ(cfg.decoder.intermediate_size, c["intermediate_size"]);
  EXPECT_EQ(cfg.decoder.num_layers, c["num_layers"]);
  EXPECT_EQ(cfg.decoder.num_heads, c["num_heads"]);
  EXPECT_EQ(cfg.decoder.num_kv_heads, c["num_kv_heads"]);
  EXPECT_EQ(cfg.decoder.head_dim, c["head_dim"]);
  EXPECT_EQ(cfg.decoder.max_position_embeddings, c["max_position_embeddings"]);
  EXPECT_FLOAT_EQ(cfg.decoder.rms_norm_eps, c["rms_norm_eps"].get<double>());
  EXPECT_EQ(cfg.decoder.rope.theta, c["rope_theta"].get<double>());
  EXPECT_FALSE(cfg.decoder.tie_word_embeddings);
  EXPECT_FALSE(cfg.decoder.attention_bias);

  for (const auto& [gname, t] : want["tensors"].items()) {
    const std::string name = HfTensorName(gname);
    ASSERT_FALSE(name.empty()) << gname;
    const Tensor* got = model.store.Find(name);
    ASSERT_NE(got, nullptr) << name;
    EXPECT_EQ(got->shape, t["shape"].get<std::vector<int64_t>>()) << name;
    EXPECT_EQ(DTypeName(got->dtype), t["type"].get<std::string>()) << name;
    const int64_t cols = got->shape.back(), rows = got->numel() / cols;
    const WeightRef w{got->data, got->dtype, rows, cols, RowBytes(got->dtype, cols)};
    std::vector<float> row(cols);
    double sum = 0;
    for (int64_t r = 0; r < rows; ++r) {
      ops::DequantizeRow(w, r, row.data());
      if (r == 0) {
        for (int i = 0; i < 8; ++i) EXPECT_EQ(row[i], t["first"][i].get<float>()) << name << " [" << i << "]";
      }
      for (float v : row) sum += v;
    }
    EXPECT_NEAR(sum, t["sum"].get<double>(), 1e-9 * rows * cols) << name;
  }
  EXPECT_EQ(HfTensorName("blk.11.ffn_down.weight"), "model.layers.11.mlp.down_proj.weight");
  EXPECT_EQ(HfTensorName("blk.0.attn_q.bias"), "model.layers.0.self_attn.q_proj.bias");
  EXPECT_EQ(HfTensorName("rope_freqs.weight"), "");
}

TEST(Gguf, BoundModelIsBatchInvariant) {
  GgufModel model = LoadGguf(kFile);
  const TargetConfig cfg = TargetConfigFromGguf(model, kFile);
  ThreadPool pool(2);
  PackMatrices(model.store, pool);
  TargetOptions o;
  o.kv_capacity = 64;
  o.max_rows = 16;
  Qwen3Model target(cfg, model.store, o, pool);
  const std::vector<int32_t> tokens = {1, 5, 9, 30, 2, 7};
  const int V = cfg.decoder.vocab_size;
  target.Forward(tokens, true);
  std::vector<float> all(target.Logits(0), target.Logits(0) + tokens.size() * V);
  for (float v : all) ASSERT_TRUE(std::isfinite(v));
  target.Truncate(0);
  for (size_t i = 0; i < tokens.size(); ++i) {
    target.Forward({&tokens[i], 1}, true);
    for (int k = 0; k < V; ++k) ASSERT_EQ(target.Logits(0)[k], all[i * V + k]) << "row " << i;
  }
}

TEST(Gguf, DamagedFilesAreErrors) {
  std::ifstream in(kFile, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), {});
  const std::string tmp = ::testing::TempDir() + "damaged.gguf";
  auto write = [&](const std::string& b) {
    std::ofstream(tmp, std::ios::binary).write(b.data(), static_cast<std::streamsize>(b.size()));
  };
  for (size_t n : {size_t{0}, size_t{3}, size_t{10}, size_t{30}, size_t{200}, size_t{1500}, bytes.size() - 1}) {
    write(bytes.substr(0, n));
    EXPECT_THROW(LoadGguf(tmp), Error) << "truncated to " << n << " bytes";
  }
  std::string bad = bytes;
  bad[0] = 'X';
  write(bad);
  EXPECT_THROW(LoadGguf(tmp), Error);
  bad = bytes;
  bad[4] = 1;  // version 1
  write(bad);
  EXPECT_THROW(LoadGguf(tmp), Error);
  std::filesystem::remove(tmp);
}

}  // namespace
}  // namespace dflash
