// GGUF in llama.cpp's names beyond the Qwen3 target (tests/gguf_test.cc): DFlash drafts under
// both architecture names ("dflash", "dflash-draft") and a GGUF's own tokenizer.ggml.*.
// tools/make_gguf_dflash_fixtures.py wrote most files with the gguf package, and
// tools/make_llamacpp_dflash_gguf.py the *.llamacpp.gguf drafts with llama.cpp's converter; the draft's
// reference is z-lab's output for the same weights (tests/goldens/dflash-tiny.safetensors), and
// the tokenizer's is the `tokenizers` library on the same vocabulary.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
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
#include "testing/goldens.h"

namespace dflash {
namespace {

namespace fs = std::filesystem;

const fs::path kTests = fs::path(DFLASH_SOURCE_DIR) / "tests";
const fs::path kGguf = kTests / "goldens" / "gguf";

using testing::Golden;

Golden ReadGolden(const std::string& name) { return Golden(testing::kGoldensDir / (name + ".safetensors")); }

Engine PairEngine(const std::string& draft_file, int prefill_chunk) {
  EngineOptions eo;
  eo.target_dir = (kTests / "fixtures" / "qwen3-tiny").string();
  eo.draft_dir = (kGguf / draft_file).string();
  eo.context = 128;
  eo.kv_type = DType::kF32;  // the goldens are f32 transformers runs
  eo.prefill_chunk = prefill_chunk;
  return Engine(eo);
}

// An f32 GGUF of a fixture draft: the same block logits as z-lab computed for the safetensors
// draft, to golden_test's tolerance, and z-lab's greedy speculative output token for token
// (which is also plain greedy's: checked here too).
void ExpectZlabGoldens(const std::string& draft_file, const std::string& golden_name) {
  SCOPED_TRACE(draft_file);
  const Golden golden = ReadGolden(golden_name);
  Engine engine = PairEngine(draft_file, 64);
  testing::ExpectDraftBlockLogitsMatch(engine, golden, 2e-4f);

  const std::vector<int32_t> prompt = ReadGolden("qwen3-tiny").I32("prompt1.ids");
  GenerateOptions go;
  go.max_new_tokens = static_cast<int>(golden.I32("spec.output").size());
  go.ignore_stop = true;
  go.block_size = engine.draft_config()->block_size;
  go.policy = SpecPolicy::kAlways;
  Engine spec = PairEngine(draft_file, 5);
  EXPECT_EQ(spec.Generate(prompt, go).tokens, golden.I32("spec.output")) << draft_file;
  go.block_size = 1;
  EXPECT_EQ(spec.Generate(prompt, go).tokens, golden.I32("spec.output")) << draft_file << ": plain greedy";
}

TEST(GgufDraft, DflashArchitectureMatchesZlabGoldens) {
  ExpectZlabGoldens("dflash-tiny.dflash.gguf", "dflash-tiny");
}

// Files written by llama.cpp's own convert_hf_to_gguf.py (tools/make_llamacpp_dflash_gguf.py):
// fc / enc.output_norm, dflash.target_layers = z-lab's ids + 1, tokenizer.ggml.mask_token_id,
// and for dflash-sliding the per-layer sliding_window_pattern.
TEST(GgufDraft, LlamaCppConvertedDraftsMatchZlabGoldens) {
  ExpectZlabGoldens("dflash-tiny.llamacpp.gguf", "dflash-tiny");
  ExpectZlabGoldens("dflash-sliding.llamacpp.gguf", "dflash-sliding");
}

// The converted f32 file is the safetensors draft: the same configuration, and every tensor
// under the same name with the same shape and bytes. (dflash2-tiny's goldens run on its GGUF in
// dflash2_test.cc.)
TEST(GgufDraft, LlamaCppConvertedDraftsAreTheSafetensorsDrafts) {
  for (const std::string name : {"dflash-tiny", "dflash-sliding", "dflash2-tiny"}) {
    const std::string path = (kGguf / (name + ".llamacpp.gguf")).string();
    const GgufModel gguf = LoadGguf(path);
    const DraftConfig a = DraftConfigFromGguf(gguf, path);
    const DraftConfig b = LoadDraftConfig((kTests / "fixtures" / name).string());
    EXPECT_EQ(a.block_size, b.block_size) << name;
    EXPECT_EQ(a.mask_token_id, b.mask_token_id) << name;
    EXPECT_EQ(a.target_layer_ids, b.target_layer_ids) << name;
    EXPECT_EQ(a.layer_causal, b.layer_causal) << name;
    EXPECT_EQ(a.decoder.layer_window, b.decoder.layer_window) << name;
    EXPECT_EQ(a.decoder.num_layers, b.decoder.num_layers) << name;
    EXPECT_EQ(a.decoder.num_kv_heads, b.decoder.num_kv_heads) << name;
    EXPECT_EQ(a.decoder.head_dim, b.decoder.head_dim) << name;
    EXPECT_EQ(a.decoder.rope.theta, b.decoder.rope.theta) << name;
    EXPECT_EQ(a.dflash2(), b.dflash2()) << name;
    EXPECT_EQ(a.conv_kernel_size, b.conv_kernel_size) << name;
    EXPECT_EQ(a.conv_group_size, b.conv_group_size) << name;
    EXPECT_EQ(a.selector_rank, b.selector_rank) << name;
    EXPECT_EQ(a.selector_top_k, b.selector_top_k) << name;
    const TensorStore st = LoadSafetensorsDir((kTests / "fixtures" / name).string());
    ASSERT_EQ(gguf.store.Names().size(), st.Names().size()) << name;
    for (const std::string& t : st.Names()) {
      // z-lab's files may name a selector codebook without ".weight"; llama.cpp always adds it.
      const Tensor* found = gguf.store.Find(t) ? gguf.store.Find(t) : gguf.store.Find(t + ".weight");
      ASSERT_NE(found, nullptr) << name << " " << t;
      const Tensor& g = *found;
      const Tensor& s = *st.Find(t);
      EXPECT_EQ(g.shape, s.shape) << name << " " << t;
      ASSERT_EQ(g.nbytes, s.nbytes) << name << " " << t;
      EXPECT_EQ(std::memcmp(g.data, s.data, s.nbytes), 0) << name << " " << t;
    }
  }
}

// What llama.cpp writes but this engine does not compute is refused by name, and malformed
// llama.cpp metadata is an error, not a different draft.
TEST(GgufDraft, RejectsLlamaCppMetadataItCannotHonour) {
  const std::string path = (kGguf / "dflash-sliding.llamacpp.gguf").string();
  auto rejects = [&](const std::string& what, const std::function<void(Json&)>& edit) {
    GgufModel m = LoadGguf(path);
    edit(m.metadata);
    EXPECT_THROW(DraftConfigFromGguf(m, what), Error) << what;
  };
  EXPECT_NO_THROW(DraftConfigFromGguf(LoadGguf(path), path));
  rejects("layer 0 (the embeddings)", [](Json& m) { m["dflash.target_layers"][0] = 0; });
  rejects("empty target_layers", [](Json& m) { m["dflash.target_layers"] = Json::array(); });
  rejects("no mask token", [](Json& m) { m.erase("tokenizer.ggml.mask_token_id"); });
  rejects("no sliding pattern", [](Json& m) { m.erase("dflash.attention.sliding_window_pattern"); });
  rejects("short sliding pattern", [](Json& m) { m["dflash.attention.sliding_window_pattern"].erase(0); });
  rejects("DFlash2 conv without the selector keys", [](Json& m) { m["dflash.conv_kernel_size"] = 4; });
  rejects("value scale", [](Json& m) { m["dflash.attention.value_scale"] = 0.5; });
  rejects("partial rotary", [](Json& m) { m["dflash.rope.dimension_count"] = 8; });
  rejects("M-RoPE sections", [](Json& m) { m["dflash.rope.dimension_sections"] = {4, 4, 0, 0}; });
  GgufModel plain_rope = LoadGguf(path);
  plain_rope.metadata["dflash.rope.dimension_sections"] = {8, 0, 0, 0};  // head_dim 16: plain RoPE
  plain_rope.metadata["dflash.rope.dimension_count"] = 16;
  EXPECT_NO_THROW(DraftConfigFromGguf(plain_rope, "plain rope"));
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
