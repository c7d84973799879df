// The one model loader (model/load.h): a Hugging Face folder, an MLX folder and a .gguf open
// through the same calls, give the same configuration and tensor names for the same model, and
// say where the tokenizer's metadata is.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/error.h"
#include "io/json_file.h"
#include "model/load.h"
#include "spec/engine.h"

namespace dflash {
namespace {

namespace fs = std::filesystem;

const fs::path kTests = fs::path(DFLASH_SOURCE_DIR) / "tests";
const std::string kTargetDir = (kTests / "fixtures" / "qwen3-tiny").string();
const std::string kTargetGguf = (kTests / "goldens" / "gguf" / "qwen3-tiny.gguf").string();
const std::string kDraftDir = (kTests / "fixtures" / "dflash-tiny").string();
const std::string kDraftGguf = (kTests / "goldens" / "gguf" / "dflash-tiny.dflash.gguf").string();

TEST(ModelLoad, FolderAndGgufTargetsSayWhereTheirMetadataIs) {
  const LoadedModel<TargetConfig> folder = LoadTarget(kTargetDir);
  EXPECT_EQ(folder.config.architecture, "Qwen3ForCausalLM");
  EXPECT_EQ(folder.config.decoder.hidden_size, 64);
  EXPECT_NE(folder.store.Find("model.embed_tokens.weight"), nullptr);
  EXPECT_EQ(folder.source.path, kTargetDir);
  EXPECT_FALSE(folder.source.gguf_metadata);
  EXPECT_EQ(LoadGenerationDefaults(folder.source).eos_tokens, std::vector<int32_t>{254});  // config.json's

  // A different tiny Qwen3 (tools/make_gguf_fixture.py): its own shape and eos token.
  const Json want = ReadJsonFile((kTests / "goldens" / "gguf" / "qwen3-tiny.json").string())["config"];
  const LoadedModel<TargetConfig> gguf = LoadTarget(kTargetGguf);
  EXPECT_EQ(gguf.config.architecture, "Qwen3ForCausalLM");
  EXPECT_EQ(gguf.config.decoder.hidden_size, want["hidden_size"]);
  EXPECT_NE(gguf.store.Find("model.embed_tokens.weight"), nullptr);
  ASSERT_TRUE(gguf.source.gguf_metadata);
  EXPECT_EQ((*gguf.source.gguf_metadata)["general.architecture"], "qwen3");
  EXPECT_EQ(LoadGenerationDefaults(gguf.source).eos_tokens, std::vector<int32_t>{want["eos_token_id"].get<int32_t>()});
}

TEST(ModelLoad, MlxFolderLoadsThroughTheSameCall) {
  const LoadedModel<TargetConfig> mlx = LoadTarget((kTests / "fixtures" / "qwen3-mlx4-g64").string());
  EXPECT_EQ(mlx.config.architecture, "Qwen3ForCausalLM");
  const Tensor* q = mlx.store.Find("model.layers.0.self_attn.q_proj.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->shape, (std::vector<int64_t>{mlx.config.decoder.num_heads * mlx.config.decoder.head_dim,
                                            mlx.config.decoder.hidden_size}));
}

TEST(ModelLoad, FolderAndGgufDraftsLoadAlike) {
  const LoadedModel<DraftConfig> folder = LoadDraft(kDraftDir);
  const LoadedModel<DraftConfig> gguf = LoadDraft(kDraftGguf);
  EXPECT_EQ(gguf.config.block_size, folder.config.block_size);
  EXPECT_EQ(gguf.config.target_layer_ids, folder.config.target_layer_ids);
  EXPECT_EQ(gguf.store.Names(), folder.store.Names());
}

TEST(ModelLoad, TargetsAndDraftsAreNotInterchangeable) {
  EXPECT_THROW(LoadTarget(kDraftGguf), Error);
  EXPECT_THROW(LoadTarget(kDraftDir), Error);
  EXPECT_THROW(LoadDraft(kTargetGguf), Error);
  EXPECT_THROW(LoadDraft(kTargetDir), Error);
}

TEST(ModelLoad, SourceAloneReadsNoFolderFiles) {
  // A tokenizer folder has no config.json or weights: opening its source must not need them.
  const fs::path dir = fs::temp_directory_path() / "dflash_model_load_source";
  fs::create_directories(dir);
  const ModelSource folder = OpenModelSource(dir.string());
  EXPECT_EQ(folder.path, dir.string());
  EXPECT_FALSE(folder.gguf_metadata);
  fs::remove_all(dir);
  const ModelSource gguf = OpenModelSource((kTests / "goldens" / "gguf" / "tiny-tokenizer.gguf").string());
  ASSERT_TRUE(gguf.gguf_metadata);
  EXPECT_TRUE(gguf.gguf_metadata->contains("tokenizer.ggml.tokens"));
}

}  // namespace
}  // namespace dflash
