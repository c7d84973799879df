// The hybrid and MoE fixture targets in the formats users hold them, as the formats' own
// converters write them (tools/make_format_fixtures.py: llama.cpp's convert_hf_to_gguf.py and
// mlx-lm's convert), against transformers goldens: of the checkpoints a GGUF was converted
// from, and of the dequantised weights of an MLX folder.
//
// Tolerances. The GGUFs (--outtype f32) hold the checkpoints' weights in f32, with the (1 + w)
// norms stored as 1 + w (undone exactly, see io/gguf_layouts.h) and A as the converter's
// -exp(A_log); the MLX folders are compared with transformers running their own weights
// (mx.dequantize in f32, the norms minus mlx-lm's 1.0). Both sides are then the same f32 model
// and differ by summation order only, so qwen35_test.cc's / moe_test.cc's 2e-4 applies. Measured
// (x86-64, AVX-512), logits and hidden states: qwen35-tiny GGUF 1.7e-5, qwen35-tied-bf16 GGUF
// 3.2e-5, qwen3moe GGUF 4.0e-6, qwen35 MLX 1.3e-5, qwen3moe MLX 6.1e-6. Against the unquantised
// checkpoint's goldens, 4-bit groups of 32 move this tiny random model's logits by up to 4.6,
// which bounds nothing useful, so that is not what the MLX cases test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "io/gguf.h"
#include "model/load.h"
#include "spec/engine.h"
#include "testing/files.h"
#include "testing/goldens.h"
#include "text/tokenizer.h"

namespace dflash {
namespace {

namespace fs = std::filesystem;
using testing::Golden;

const fs::path kFormats = testing::kGoldensDir / "formats";

struct Case {
  fs::path file;       // a GGUF under tests/goldens/formats, or an MLX folder under tests/fixtures
  std::string golden;  // transformers' goldens of the model it holds
};

constexpr float kTolerance = 2e-4f;

const Case kCases[] = {
    {kFormats / "qwen35-tiny.llamacpp.gguf", "qwen35-tiny"},
    {kFormats / "qwen35-tied-bf16.llamacpp.gguf", "qwen35-tied-bf16"},
    {kFormats / "qwen3moe-all-sparse.llamacpp.gguf", "formats/qwen3moe-all-sparse"},
    // Against transformers running the folder's own weights (mx-dequantised in f32).
    {testing::kFixturesDir / "qwen35-tiny-mlx4", "formats/qwen35-tiny-mlx4"},
    {testing::kFixturesDir / "qwen3moe-all-sparse-mlx4", "formats/qwen3moe-all-sparse-mlx4"},
};

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  const std::string file = info.param.file.filename().string();
  std::string s = file.substr(0, file.find('.'));
  for (char& c : s) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return s;
}

Golden GoldenOf(const Case& c) { return Golden(testing::kGoldensDir / (c.golden + ".safetensors")); }

Engine MakeEngine(const fs::path& target, const std::string& draft = "") {
  EngineOptions eo;
  eo.target_dir = target.string();
  eo.draft_dir = draft.empty() ? "" : (testing::kFixturesDir / draft).string();
  eo.context = 128;
  eo.kv_type = DType::kF32;  // the goldens are f32 transformers runs
  eo.prefill_chunk = 5;
  return Engine(eo);
}

class ConvertedFormat : public ::testing::TestWithParam<Case> {};

TEST_P(ConvertedFormat, LogitsAndHiddenStatesMatchTransformers) {
  const Case& c = GetParam();
  const Golden g = GoldenOf(c);
  const LoadedModel<TargetConfig> loaded = LoadTarget(c.file.string());
  TargetOptions opt;
  opt.kv_capacity = 128;
  for (int l = 0; l < loaded.config.decoder.num_layers; ++l) opt.capture_layers.push_back(l);
  ThreadPool pool(2);
  const std::unique_ptr<TargetModel> model = NewTargetModel(loaded.config, loaded.store, opt, pool);
  for (int p = 0; p < 3; ++p) {
    const std::string key = "prompt" + std::to_string(p);
    const testing::PromptDiff worst = testing::PrefillDiff(*model, g, key);
    EXPECT_LT(worst.logits, kTolerance) << c.file.filename() << " " << key;
    EXPECT_LT(worst.hidden, kTolerance) << c.file.filename() << " " << key;
  }
}

TEST_P(ConvertedFormat, GreedyTokensEqualTransformers) {
  const Case& c = GetParam();
  const Golden g = GoldenOf(c);
  Engine engine = MakeEngine(c.file);
  GenerateOptions go;
  go.max_new_tokens = static_cast<int>(g.I32("greedy").size());
  go.ignore_stop = true;
  go.block_size = 1;
  EXPECT_EQ(engine.Generate(g.I32("prompt1.ids"), go).tokens, g.I32("greedy")) << c.file.filename();
}

INSTANTIATE_TEST_SUITE_P(Formats, ConvertedFormat, ::testing::ValuesIn(kCases), CaseName);

// The hybrid GGUF with the z-lab draft made for its source checkpoint: DFlash greedy is plain
// greedy (transformers' generate), with cycles that really speculated.
TEST(GgufHybrid, DflashGreedyEqualsPlainGreedy) {
  Engine engine = MakeEngine(kFormats / "qwen35-tiny.llamacpp.gguf", "dflash-qwen35");
  testing::ExpectDflashGreedyEqualsGolden(engine, Golden(testing::kGoldensDir / "qwen35-tiny.safetensors"));
}

// The tokenizer a Qwen3.5 GGUF carries (tokenizer.ggml.pre "qwen35"), as llama.cpp's converter
// wrote it from tests/data/tokenizers/tiny-qwen35, encodes every text of that tokenizer's
// Hugging Face goldens (tests/goldens/text/tiny-qwen35.jsonl: combining marks, NFC, digits,
// added tokens) to the same ids.
TEST(GgufHybrid, Qwen35PreTokenizerMatchesHuggingFace) {
  const fs::path file = kFormats / "tiny-qwen35.vocab.gguf";
  const GgufModel gguf = LoadGguf(file.string());
  ASSERT_EQ(gguf.metadata.at("tokenizer.ggml.pre"), "qwen35");
  ASSERT_TRUE(gguf.metadata.contains("tokenizer.chat_template"));
  const text::Tokenizer tok = text::Tokenizer::FromGguf(gguf.metadata, file.string());
  std::istringstream lines(testing::ReadAll(testing::kGoldensDir / "text" / "tiny-qwen35.jsonl"));
  int checked = 0;
  for (std::string line; std::getline(lines, line);) {
    const Json j = Json::parse(line);
    if (!j.contains("ids")) continue;  // the meta line
    EXPECT_EQ(tok.Encode(j.at("text").get<std::string>(), j.value("parse_special", true)),
              j.at("ids").get<std::vector<int32_t>>())
        << line;
    ++checked;
  }
  EXPECT_GT(checked, 100);
}

// Bad input: llama.cpp-layout files with one thing wrong, made by patching the converter's
// output in place (same lengths, so everything else stays valid).
class GgufHybridBadInput : public testing::ScratchDirTest {
 protected:
  // The converted file with the first `from` after `after` replaced by `to` (same length).
  fs::path Patched(const std::string& from, const std::string& to, const std::string& after = "",
                   const std::string& file = "qwen35-tiny.llamacpp.gguf") {
    std::string bytes = testing::ReadAll(kFormats / file);
    const size_t at = bytes.find(from, bytes.find(after));
    EXPECT_NE(at, std::string::npos) << from;
    EXPECT_EQ(from.size(), to.size());
    bytes.replace(at, from.size(), to);
    const fs::path out = dir_ / "bad.gguf";
    testing::WriteAll(out, bytes);
    return out;
  }
};

TEST_F(GgufHybridBadInput, MissingSsmAIsNamed) {
  const fs::path f = Patched("blk.2.ssm_a", "blk.2.ssm_q");
  testing::ExpectMentions(testing::ErrorOf([&] { LoadTarget(f.string()); }), {"bad.gguf", "'blk.2.ssm_a'", "missing"});
}

TEST_F(GgufHybridBadInput, WrongSsmTensorShapeIsNamed) {
  // blk.1.ssm_conv1d.weight's dimensions follow its name: n_dims (u32), then ne[0] = kernel 4,
  // ne[1] = 96 channels; claim 48 channels.
  std::string bytes = testing::ReadAll(kFormats / "qwen35-tiny.llamacpp.gguf");
  const std::string name = "blk.1.ssm_conv1d.weight";
  const size_t at = bytes.find(name);
  ASSERT_NE(at, std::string::npos);
  const size_t ne1 = at + name.size() + 4 + 8;
  uint64_t channels = 0;
  std::memcpy(&channels, bytes.data() + ne1, 8);
  ASSERT_EQ(channels, 96u);
  channels = 48;
  std::memcpy(bytes.data() + ne1, &channels, 8);
  const fs::path f = dir_ / "bad.gguf";
  testing::WriteAll(f, bytes);
  testing::ExpectMentions(testing::ErrorOf([&] { LoadTarget(f.string()); }),
                          {"bad.gguf", "'blk.1.ssm_conv1d.weight'", "[48, 4]", "[96, 4]"});
}

TEST_F(GgufHybridBadInput, UnknownPreTokenizerIsNamed) {
  const fs::path f = Patched("qwen35", "qwen99", "tokenizer.ggml.pre", "tiny-qwen35.vocab.gguf");
  const GgufModel gguf = LoadGguf(f.string());
  testing::ExpectMentions(testing::ErrorOf([&] { text::Tokenizer::FromGguf(gguf.metadata, f.string()); }),
                          {"tokenizer.ggml.pre 'qwen99'", "not supported"});
}

}  // namespace
}  // namespace dflash
