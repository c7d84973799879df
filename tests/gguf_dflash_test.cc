// GGUF in llama.cpp's names beyond the Qwen3 target (tests/gguf_test.cc): DFlash drafts under
// both architecture names ("dflash", "dflash-draft") and a GGUF's own tokenizer.ggml.*.
// tools/make_gguf_dflash_fixtures.py wrote every file with the gguf package; the draft's
// reference is z-lab's output for the same weights (tests/goldens/dflash-tiny.safetensors), and
// the tokenizer's is the `tokenizers` library on the same vocabulary.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>

#include "draft/dflash_draft.h"
#include "io/gguf.h"
#include "io/safetensors.h"
#include "model/gguf_config.h"
#include "spec/engine.h"
#include "spec/sampler.h"
#include "text/gguf_vocab.h"
#include "text/tokenizer.h"

namespace dflash {
namespace {

namespace fs = std::filesystem;

const fs::path kTests = fs::path(DFLASH_SOURCE_DIR) / "tests";
const fs::path kGguf = kTests / "goldens" / "gguf";

const Tensor& Get(const TensorStore& s, const std::string& name) {
  const Tensor* t = s.Find(name);
  if (!t) throw Error("golden tensor '" + name + "' missing");
  return *t;
}

std::vector<float> F32(const TensorStore& s, const std::string& name) {
  const auto* p = reinterpret_cast<const float*>(Get(s, name).data);
  return std::vector<float>(p, p + Get(s, name).numel());
}

std::vector<int32_t> I32(const TensorStore& s, const std::string& name) {
  const auto* p = reinterpret_cast<const int32_t*>(Get(s, name).data);
  return std::vector<int32_t>(p, p + Get(s, name).numel());
}

Engine PairEngine(const std::string& draft_file, int prefill_chunk) {
  EngineOptions eo;
  eo.target_dir = (kTests / "fixtures" / "qwen3-tiny").string();
  eo.draft_dir = (kGguf / draft_file).string();
  eo.context = 128;
  eo.kv_type = DType::kF32;  // the goldens are f32 transformers runs
  eo.prefill_chunk = prefill_chunk;
  return Engine(eo);
}

// The "dflash" file holds z-lab's f32 draft: the same block logits as z-lab computed, to
// golden_test's tolerance, and z-lab's greedy speculative output token for token.
TEST(GgufDraft, DflashArchitectureMatchesZlabGoldens) {
  TensorStore golden("dflash-tiny golden");
  AddSafetensorsFile((kTests / "goldens" / "dflash-tiny.safetensors").string(), golden);
  Engine engine = PairEngine("dflash-tiny.dflash.gguf", 64);
  const std::vector<int32_t> ctx = I32(golden, "block.context");
  const std::vector<float> ref = F32(golden, "block.logits");
  const int n = static_cast<int>(ctx.size());
  const int B = engine.draft_config()->block_size;
  const size_t V = engine.target_config().decoder.vocab_size;
  ASSERT_EQ(B, 16);
  ASSERT_EQ(ref.size(), (B - 1) * V);
  engine.target().Truncate(0);
  engine.target().Forward(ctx, /*all_logits=*/false);
  const int32_t anchor = Sampler::Argmax(engine.target().Logits(0), V);
  ASSERT_EQ(anchor, I32(golden, "block.anchor")[0]);
  DFlashDraft& draft = *static_cast<DFlashDraft*>(engine.drafter());
  draft.TruncateContext(0);
  draft.AppendContext(engine.target().Features(0), n, 0);
  draft.Propose(anchor, n, B, B - 1);
  float worst = 0;
  for (int j = 0; j < B - 1; ++j)
    for (size_t v = 0; v < V; ++v) worst = std::max(worst, std::fabs(draft.Logits(j)[v] - ref[j * V + v]));
  EXPECT_LT(worst, 2e-4f);

  TensorStore target_golden("qwen3-tiny golden");
  AddSafetensorsFile((kTests / "goldens" / "qwen3-tiny.safetensors").string(), target_golden);
  GenerateOptions go;
  go.max_new_tokens = static_cast<int>(I32(golden, "spec.output").size());
  go.ignore_stop = true;
  go.block_size = B;
  go.policy = SpecPolicy::kAlways;
  Engine spec = PairEngine("dflash-tiny.dflash.gguf", 5);
  EXPECT_EQ(spec.Generate(I32(target_golden, "prompt1.ids"), go).tokens, I32(golden, "spec.output"));
}

// The forks' layout (ffn_norm, token_embd/output copies, Q8_0): the same configuration and
// tensors as the safetensors draft, and lossless greedy speculation.
TEST(GgufDraft, DflashDraftArchitectureLoadsTheSameDraft) {
  const GgufModel fork = LoadGguf((kGguf / "dflash-tiny.dflash-draft.gguf").string());
  const GgufModel upstream = LoadGguf((kGguf / "dflash-tiny.dflash.gguf").string());
  const DraftConfig a = DraftConfigFromGguf(fork, "fork");
  const DraftConfig b = LoadDraftConfig((kTests / "fixtures" / "dflash-tiny").string());
  EXPECT_EQ(a.block_size, b.block_size);
  EXPECT_EQ(a.mask_token_id, b.mask_token_id);
  EXPECT_EQ(a.target_layer_ids, b.target_layer_ids);
  EXPECT_EQ(a.layer_causal, b.layer_causal);
  EXPECT_EQ(a.decoder.hidden_size, b.decoder.hidden_size);
  EXPECT_EQ(a.decoder.num_layers, b.decoder.num_layers);
  EXPECT_EQ(a.decoder.num_kv_heads, b.decoder.num_kv_heads);
  EXPECT_EQ(a.decoder.head_dim, b.decoder.head_dim);
  EXPECT_EQ(a.decoder.rope.theta, b.decoder.rope.theta);
  const TensorStore st = LoadSafetensorsDir((kTests / "fixtures" / "dflash-tiny").string());
  EXPECT_EQ(fork.store.Names(), st.Names());
  EXPECT_EQ(upstream.store.Names(), st.Names());
  for (const std::string& name : st.Names()) {
    EXPECT_EQ(fork.store.Find(name)->shape, st.Find(name)->shape) << name;
    EXPECT_EQ(fork.store.Find(name)->dtype, st.Find(name)->shape.size() == 2 ? DType::kQ8_0 : DType::kF32) << name;
  }

  GenerateOptions go;
  go.max_new_tokens = 24;
  go.ignore_stop = true;
  const std::vector<int32_t> prompt{3, 141, 59, 26, 53, 58, 97};
  Engine engine = PairEngine("dflash-tiny.dflash-draft.gguf", 8);
  go.block_size = 1;
  const std::vector<int32_t> plain = engine.Generate(prompt, go).tokens;
  go.block_size = 16;
  go.policy = SpecPolicy::kAlways;
  EXPECT_EQ(engine.Generate(prompt, go).tokens, plain);
}

TEST(GgufDraft, RejectsMissingDflashMetadataAndWrongArchitecture) {
  GgufModel m = LoadGguf((kGguf / "dflash-tiny.dflash.gguf").string());
  EXPECT_THROW(TargetConfigFromGguf(m, "draft-as-target"), Error);
  const Json ids = m.metadata["dflash.dflash.target_layer_ids"];
  m.metadata.erase("dflash.dflash.target_layer_ids");
  EXPECT_THROW(DraftConfigFromGguf(m, "no ids"), Error);
  m.metadata["dflash.dflash.target_layer_ids"] = ids;
  m.metadata["dflash.dflash.n_target_features"] = 100;
  EXPECT_THROW(DraftConfigFromGguf(m, "bad features"), Error);
  m.metadata.erase("dflash.dflash.n_target_features");
  m.metadata["dflash.attention.sliding_window"] = 8;
  EXPECT_THROW(DraftConfigFromGguf(m, "sliding"), Error);
  const GgufModel target = LoadGguf((kGguf / "qwen3-tiny.gguf").string());
  EXPECT_THROW(DraftConfigFromGguf(target, "target-as-draft"), Error);
}

const Json& TokenizerGolden() {
  static const Json j = ReadJsonFile((kGguf / "tiny-tokenizer.json").string());
  return j;
}

// Encode and decode of the whole text corpus, id for id against the `tokenizers` library.
TEST(GgufTokenizer, MatchesTheReferenceOnTheTextCorpus) {
  const std::string path = (kGguf / "tiny-tokenizer.gguf").string();
  const text::Tokenizer tok = text::Tokenizer::FromGguf(LoadGguf(path).metadata, path);
  const Json& g = TokenizerGolden();
  EXPECT_EQ(tok.vocab_size(), 906);  // ids 906..911 are unused padding: no token
  EXPECT_THROW(tok.TokenBytes(910), Error);
  EXPECT_EQ(tok.eos_id(), g["special_ids"]["eos"].get<int>());
  EXPECT_EQ(tok.pad_id(), g["special_ids"]["pad"].get<int>());
  EXPECT_EQ(tok.bos_id(), -1);
  EXPECT_FALSE(tok.add_bos());
  EXPECT_TRUE(tok.IsSpecial(tok.TokenId("<|im_end|>")));
  EXPECT_FALSE(tok.IsSpecial(tok.TokenId("<think>")));
  for (const Json& c : g["cases"]) {
    const std::string file = c["file"];
    std::FILE* f = std::fopen((kTests / "data" / "text_corpus" / file).c_str(), "rb");
    ASSERT_NE(f, nullptr) << file;
    std::string text;
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, n);
    std::fclose(f);
    const std::vector<int32_t> ids = tok.Encode(text);
    EXPECT_EQ(ids, c["ids"].get<std::vector<int32_t>>()) << file;
    EXPECT_EQ(tok.Decode(c["ids"].get<std::vector<int32_t>>()), c["decoded"].get<std::string>()) << file;
  }
}

// Third-party tokenizers and chat templates vendored for the tests (see tests/data/NOTICE.md).
std::string DataDir() { return std::string(DFLASH_SOURCE_DIR) + "/tests/data"; }

// tokenizer.ggml.pre "qwen2" must mean exactly what Qwen3's own tokenizer.json spells.
TEST(GgufTokenizer, Qwen2PreTokenizerIsQwen3TokenizerJsons) {
  const std::string file = DataDir() + "/tokenizers/qwen3/tokenizer.json";
  const Json tj = ReadJsonFile(file);
  EXPECT_EQ(text::GgufPreTokenizer("qwen2", "t"), tj["pre_tokenizer"]);
  EXPECT_EQ(text::GgufNormalizer("qwen2"), tj["normalizer"]);
}

TEST(GgufTokenizer, RejectsWhatItCannotRead) {
  const std::string path = (kGguf / "tiny-tokenizer.gguf").string();
  const Json good = LoadGguf(path).metadata;
  auto rejects = [&](const std::function<void(Json&)>& edit) {
    Json m = good;
    edit(m);
    EXPECT_THROW(text::Tokenizer::FromGguf(m, "edited"), Error) << m.value("tokenizer.ggml.pre", Json()).dump();
  };
  rejects([](Json& m) { m["tokenizer.ggml.model"] = "llama"; });  // SentencePiece
  rejects([](Json& m) { m["tokenizer.ggml.pre"] = "deepseek-coder"; });
  rejects([](Json& m) { m["tokenizer.ggml.token_type"][5] = 2; });
  rejects([](Json& m) { m["tokenizer.ggml.token_type"].erase(0); });
  rejects([](Json& m) { m.erase("tokenizer.ggml.merges"); });
  rejects([](Json& m) { m["tokenizer.ggml.tokens"][7] = m["tokenizer.ggml.tokens"][8]; });
  rejects([](Json& m) { m["tokenizer.ggml.eos_token_id"] = 910; });  // an unused id
  rejects([](Json& m) { m["tokenizer.ggml.add_bos_token"] = true; });  // but no bos id
  EXPECT_THROW(text::GgufPreTokenizer("nonsense", "t"), Error);
}

// A bare .gguf is enough for generate --prompt: its own tokenizer encodes the prompt.
TEST(GgufTokenizer, GenerateTakesATextPromptFromABareGguf) {
  const std::string cmd = std::string(DFLASH_BINARY) + " generate --json -n 4 -m " +
                          (kGguf / "tiny-tokenizer.gguf").string() + " --prompt 'Hello world' 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[512];
  while (fgets(buf, sizeof buf, p)) out += buf;
  ASSERT_EQ(pclose(p), 0) << out;
  const Json j = Json::parse(out.substr(out.find('{')));
  const std::string path = (kGguf / "tiny-tokenizer.gguf").string();
  const text::Tokenizer tok = text::Tokenizer::FromGguf(LoadGguf(path).metadata, path);
  EXPECT_EQ(j.at("prompt_tokens").get<int>(), static_cast<int>(tok.Encode("Hello world").size())) << out;
  EXPECT_TRUE(j.contains("text")) << out;
}

}  // namespace
}  // namespace dflash
