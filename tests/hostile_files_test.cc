// Hostile model files (issue 36, found by mutating model files under ASan+UBSan): shapes whose
// element or byte counts overflow, MLX triples that disagree, JSON nested deep enough to
// overflow the stack, values too long to print, configs that would allocate without bound or
// wrap to small numbers, absurd thread counts. Each must be a clear Error naming the file, the
// field or tensor and the value, never a crash, a hang or a huge allocation.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <string>

#include "core/error.h"
#include "core/thread_pool.h"
#include "io/gguf.h"
#include "io/json_file.h"
#include "io/mlx_quantized.h"
#include "io/safetensors.h"
#include "model/config.h"
#include "model/gguf_config.h"
#include "spec/engine.h"
#include "text/tokenizer.h"
#include "testing/files.h"

namespace dflash {
namespace {

namespace fs = std::filesystem;

using testing::ErrorOf;
using testing::ExpectMentions;
using testing::ReadAll;
using testing::WriteAll;

const fs::path& kTests = testing::kTestsDir;
const fs::path& kFixtures = testing::kFixturesDir;

// Long enough that a message quoting it whole is obviously unbounded.
constexpr size_t kLong = 100'000;
// What a message that names file, field and value needs, with room to spare.
constexpr size_t kShortMessage = 600;

// `depth` nested arrays around 1, as JSON text.
std::string DeepArray(int depth) { return std::string(depth, '[') + "1" + std::string(depth, ']'); }

// A fresh copy of fixtures under a per-test temporary directory.
class HostileFiles : public testing::ScratchDirTest {
 protected:
  fs::path Copy(const std::string& fixture) { return CopyFixture(fixture); }

  // Rewrites the JSON header of model/model.safetensors through `edit`, keeping the data.
  static void EditHeader(const fs::path& model, const std::function<void(Json&)>& edit) {
    testing::EditSafetensorsHeader(model / "model.safetensors", edit);
  }
  static void WriteHeader(const fs::path& file, const std::string& header, const std::string& data) {
    testing::WriteSafetensors(file, header, data);
  }
};

// --- Shapes from files -------------------------------------------------------------------

// The ASan find: U32 words [2^62 + 256, 16] and BF16 scales [2^62 + 256, 2] wrap their byte
// counts to exactly the spans the fixture's data_offsets give (16384 and 1024), so the size
// check passed and Repack wrote past its buffer.
TEST_F(HostileFiles, MlxShapeWhoseByteCountWrapsIsRejected) {
  const fs::path model = Copy("qwen3-mlx4-g64");
  const int64_t rows = (int64_t{1} << 62) + 256;
  EditHeader(model, [&](Json& h) {
    h["lm_head.weight"]["shape"] = {rows, 16};
    h["lm_head.scales"]["shape"] = {rows, 2};
    h["lm_head.biases"]["shape"] = {rows, 2};
  });
  const std::string msg = ErrorOf([&] { LoadSafetensorsDir(model.string()); });
  ExpectMentions(msg, {"model.safetensors", "lm_head.", std::to_string(rows), "64 bits"});
}

TEST_F(HostileFiles, SafetensorsByteCountThatWrapsToZeroIsRejected) {
  const fs::path model = Copy("qwen3-tiny");
  // 2^62 f32 elements are 2^64 bytes: 0 after wrapping, the span of data_offsets [0, 0].
  EditHeader(model, [](Json& h) {
    h["model.norm.weight"]["shape"] = {int64_t{1} << 62};
    h["model.norm.weight"]["data_offsets"] = {0, 0};
  });
  const std::string msg = ErrorOf([&] { LoadSafetensorsDir(model.string()); });
  ExpectMentions(msg, {"model.safetensors", "model.norm.weight", "4611686018427387904", "64 bits"});
}

// An empty packed matrix [0, 2^61] passed every check while its logical width overflowed.
TEST_F(HostileFiles, EmptyMlxWeightIsRejected) {
  const fs::path model = Copy("qwen3-mlx4-g64");
  EditHeader(model, [](Json& h) {
    h["lm_head.weight"]["shape"] = {0, int64_t{1} << 61};
    h["lm_head.weight"]["data_offsets"] = {0, 0};
  });
  const std::string msg = ErrorOf([&] { LoadSafetensorsDir(model.string()); });
  ExpectMentions(msg, {"lm_head", "non-empty", "[0, 2305843009213693952]"});
}

// Repack reads the words, scales and biases at their shapes' sizes: a store whose bytes are
// fewer than its shapes say (not from a file that passed TensorBytes) is refused first.
TEST(HostileMlx, TensorsShorterThanTheirShapesAreRejectedBeforeRepacking) {
  const Json config = {{"quantization", {{"group_size", 32}, {"bits", 4}}}};
  std::vector<uint8_t> bytes(64, 0);
  auto store_with = [&](size_t weight_bytes, size_t scales_bytes) {
    auto store = std::make_unique<TensorStore>("memory");
    auto add = [&](const char* name, DType dtype, std::vector<int64_t> shape, size_t nbytes) {
      Tensor t;
      t.name = name;
      t.dtype = dtype;
      t.shape = std::move(shape);
      t.data = bytes.data();
      t.nbytes = nbytes;
      t.file = "memory";
      store->Add(std::move(t));
    };
    add("m.weight", DType::kU32, {4, 4}, weight_bytes);  // 4 rows of 32 four-bit codes
    add("m.scales", DType::kF16, {4, 1}, scales_bytes);
    add("m.biases", DType::kF16, {4, 1}, 8);
    return store;
  };
  EXPECT_EQ(RepackMlxQuantized(config, "config.json", *store_with(64, 8)), 1);
  ExpectMentions(ErrorOf([&] { RepackMlxQuantized(config, "config.json", *store_with(16, 8)); }),
                 {"'m'", "[4, 4]", "16 bytes"});
  ExpectMentions(ErrorOf([&] { RepackMlxQuantized(config, "config.json", *store_with(64, 2)); }),
                 {"m.scales", "2 bytes"});
}

TEST(HostileShapes, TensorBytesChecksEveryProduct) {
  EXPECT_EQ(TensorBytes(DType::kF32, {3, 5}, "t"), 60u);
  EXPECT_EQ(TensorBytes(DType::kQ4_K, {2, 512}, "t"), 2u * 2 * 144);
  EXPECT_EQ(TensorBytes(DType::kBF16, {}, "t"), 2u);
  EXPECT_EQ(TensorBytes(DType::kF32, {0, int64_t{1} << 62}, "t"), 0u);
  ExpectMentions(ErrorOf([] { TensorBytes(DType::kF32, {-1, 4}, "file: tensor 'x'"); }), {"tensor 'x'", "negative"});
  ExpectMentions(ErrorOf([] { TensorBytes(DType::kF32, {int64_t{1} << 32, int64_t{1} << 32}, "x"); }),
                 {"[4294967296, 4294967296]", "elements"});
  // 2^62 elements fit in int64; their 2^64 bytes do not.
  ExpectMentions(ErrorOf([] { TensorBytes(DType::kF32, {int64_t{1} << 62}, "x"); }), {"bytes", "64 bits"});
  ExpectMentions(ErrorOf([] { TensorBytes(DType::kQ8_0, {4, 33}, "x"); }), {"33", "Q8_0"});
}

// GGUF dimensions are each at most 2^40; four of them overflow 64 bits together.
TEST_F(HostileFiles, GgufDimensionsWhoseProductOverflowsAreRejected) {
  std::string b;
  auto put = [&](auto v) { b.append(reinterpret_cast<const char*>(&v), sizeof v); };
  auto str = [&](const std::string& s) {
    put(uint64_t{s.size()});
    b += s;
  };
  put(uint32_t{0x46554747});  // "GGUF"
  put(uint32_t{3});
  put(uint64_t{1});  // tensors
  put(uint64_t{0});  // metadata
  str("blk.0.attn_q.weight");
  put(uint32_t{4});
  for (int i = 0; i < 4; ++i) put(uint64_t{1} << 40);
  put(uint32_t{0});  // F32
  put(uint64_t{0});  // offset
  b.resize(b.size() + 64, '\0');
  const fs::path file = dir_ / "overflow.gguf";
  WriteAll(file, b);
  ExpectMentions(ErrorOf([&] { LoadGguf(file.string()); }), {"overflow.gguf", "blk.0.attn_q.weight", "64 bits"});
}

// --- JSON nesting and error messages -----------------------------------------------------

TEST(HostileJson, DepthIsBoundedBeforeParsing) {
  EXPECT_NO_THROW(ParseJson(DeepArray(kMaxJsonDepth), "f.json"));
  ExpectMentions(ErrorOf([] { ParseJson(DeepArray(kMaxJsonDepth + 1), "f.json"); }),
                 {"f.json", "nested deeper than 64", "byte 64"});
  // Brackets inside strings, escaped quotes included, are text, not nesting.
  const std::string brackets = "{\"a\": \"\\\"" + std::string(1000, '[') + "\"}";
  EXPECT_EQ(ParseJson(brackets, "f.json")["a"].get<std::string>().size(), 1001u);
  ExpectMentions(ErrorOf([] { ParseJson("{\"a\": ", "f.json"); }), {"f.json", "malformed JSON"});
}

TEST_F(HostileFiles, DeepConfigJsonIsAnErrorNotAStackOverflow) {
  const fs::path model = Copy("qwen3-tiny");
  // A config that is right up to hidden_size, whose wrong type was dumped into the message.
  Json j = ReadJsonFile((model / "config.json").string());
  j.erase("hidden_size");
  std::string text = j.dump();
  text.insert(text.size() - 1, ", \"hidden_size\": " + DeepArray(100'000));
  WriteAll(model / "config.json", text);
  ExpectMentions(ErrorOf([&] { LoadTargetConfig(model.string()); }), {"config.json", "nested deeper"});
}

TEST_F(HostileFiles, DeepSafetensorsHeaderIsAnErrorNotAStackOverflow) {
  const fs::path model = Copy("qwen3-tiny");
  WriteHeader(model / "model.safetensors", "{\"__metadata__\": " + DeepArray(100'000) + "}", "");
  ExpectMentions(ErrorOf([&] { LoadSafetensorsDir(model.string()); }), {"model.safetensors", "nested deeper"});
}

// A value within the depth bound but long: the message names field and type, and stays short.
TEST_F(HostileFiles, ConfigErrorsDoNotQuoteWholeValues) {
  const Json base = ReadJsonFile((kFixtures / "qwen3-tiny" / "config.json").string());
  for (const Json& bad : {Json(std::string(kLong, 'x')), Json(std::vector<int>(kLong, 7)), Json::parse(DeepArray(60))}) {
    Json j = base;
    j["hidden_size"] = bad;
    const std::string msg = ErrorOf([&] { TargetConfigFromJson(j, "config.json"); });
    ExpectMentions(msg, {"config.json", "'hidden_size'"});
    EXPECT_LT(msg.size(), kShortMessage) << msg.substr(0, kShortMessage);
  }
}

class HostileTokenizer : public HostileFiles {
 protected:
  void SetUp() override {
    HostileFiles::SetUp();
    good_ = ReadJsonFile((kTests / "goldens" / "gguf" / "tiny-tokenizer.json").string());
  }
  std::string LoadError(const std::string& text) {
    WriteAll(dir_ / "tokenizer.json", text);
    return ErrorOf([&] { text::Tokenizer::Load(dir_.string()); });
  }
  Json good_;
};

TEST_F(HostileTokenizer, DeepTokenizerJsonIsAnErrorNotAStackOverflow) {
  // The decoder was copied, and dumped into the message when not ByteLevel.
  good_.erase("decoder");
  std::string text = good_.dump();
  text.insert(text.size() - 1, ", \"decoder\": " + DeepArray(100'000));
  ExpectMentions(LoadError(text), {"tokenizer.json", "nested deeper"});
}

TEST_F(HostileTokenizer, ErrorsDoNotQuoteWholeValues) {
  const Json long_string = std::string(kLong, 'x');
  const Json long_array = std::vector<int>(kLong, 7);
  const std::function<void(Json&)> edits[] = {
      [&](Json& j) { j["decoder"] = long_string; },
      [&](Json& j) { j["decoder"] = {{"type", long_array}}; },
      [&](Json& j) { j["model"]["dropout"] = long_string; },
      [&](Json& j) { j["model"]["merges"][0] = long_array; },
      [&](Json& j) { j["model"]["merges"][0] = {long_array, "a"}; },
      [&](Json& j) { j["model"]["vocab"]["a"] = long_string; },
  };
  for (const auto& edit : edits) {
    Json j = good_;
    edit(j);
    const std::string msg = LoadError(j.dump());
    EXPECT_NE(msg.find("tokenizer.json"), std::string::npos) << msg.substr(0, kShortMessage);
    EXPECT_LT(msg.size(), kShortMessage) << msg.substr(0, kShortMessage);
  }
}

TEST_F(HostileTokenizer, GgufTokenizerErrorsDoNotQuoteWholeValues) {
  const Json meta = {{"tokenizer.ggml.model", std::string(kLong, 'x')}};
  const std::string msg = ErrorOf([&] { text::Tokenizer::FromGguf(meta, "m.gguf"); });
  ExpectMentions(msg, {"m.gguf", "tokenizer.ggml.model"});
  EXPECT_LT(msg.size(), kShortMessage);
}

// --- Config values -----------------------------------------------------------------------

Json FixtureConfig(const std::string& fixture) { return ReadJsonFile((kFixtures / fixture / "config.json").string()); }

// Applies `edit` to the fixture's config and returns the parse error.
std::string DraftConfigError(const std::function<void(Json&)>& edit) {
  Json j = FixtureConfig("dflash-tiny");
  edit(j);
  return ErrorOf([&] { DraftConfigFromJson(j, "draft/config.json"); });
}
std::string TargetConfigError(const std::function<void(Json&)>& edit) {
  Json j = FixtureConfig("qwen3-tiny");
  edit(j);
  return ErrorOf([&] { TargetConfigFromJson(j, "target/config.json"); });
}

TEST(HostileConfig, SizesBeyondAnyRealModelAreRejectedBeforeAllocating) {
  ExpectMentions(DraftConfigError([](Json& j) { j["dflash_config"]["block_size"] = 1'000'000; }),
                 {"draft/config.json", "'block_size'", "1000000", "[1, 64]"});
  ExpectMentions(TargetConfigError([](Json& j) { j["num_hidden_layers"] = 1'000'000'000; }),
                 {"target/config.json", "'num_hidden_layers'", "1000000000"});
  ExpectMentions(TargetConfigError([](Json& j) { j["head_dim"] = 1'000'000'000; }), {"'head_dim'", "1000000000"});
  // The draft's q_dim (heads x head_dim) overflowed an int here.
  ExpectMentions(DraftConfigError([](Json& j) { j["head_dim"] = 1'000'000'000; }), {"'head_dim'", "1000000000"});
  ExpectMentions(TargetConfigError([](Json& j) { j["vocab_size"] = 1'000'000'000; }), {"'vocab_size'"});
  ExpectMentions(TargetConfigError([](Json& j) { j["intermediate_size"] = 1'000'000'000; }), {"'intermediate_size'"});
  ExpectMentions(TargetConfigError([](Json& j) { j["num_attention_heads"] = 1'000'000; }), {"'num_attention_heads'"});
  ExpectMentions(TargetConfigError([](Json& j) { j["max_position_embeddings"] = int64_t{1} << 40; }),
                 {"'max_position_embeddings'"});
  ExpectMentions(DraftConfigError([](Json& j) { j["dflash_config"]["target_layer_ids"] = std::vector<int>(5000, 0); }),
                 {"'target_layer_ids'", "5000 entries"});
}

TEST(HostileConfig, IntegersAreNotWrappedTo32Bits) {
  const int64_t hidden = (int64_t{1} << 32) + 64, mask = (int64_t{1} << 32) + 16;
  ExpectMentions(TargetConfigError([&](Json& j) { j["hidden_size"] = hidden; }), {"'hidden_size'", "4294967360"});
  ExpectMentions(DraftConfigError([&](Json& j) { j["dflash_config"]["mask_token_id"] = mask; }),
                 {"'mask_token_id'", "4294967312"});
  ExpectMentions(DraftConfigError([&](Json& j) { j["dflash_config"]["target_layer_ids"] = {0, int64_t{1} << 32}; }),
                 {"'target_layer_ids'", "out of range"});
  ExpectMentions(TargetConfigError([](Json& j) { j["num_hidden_layers"] = uint64_t{1} << 63; }),
                 {"'num_hidden_layers'", "9223372036854775808"});
}

TEST(HostileConfig, NonPositiveOrNonFiniteScalesAreRejected) {
  ExpectMentions(TargetConfigError([](Json& j) { j["rms_norm_eps"] = -1e-6; }), {"'rms_norm_eps'", "positive"});
  ExpectMentions(TargetConfigError([](Json& j) { j["rms_norm_eps"] = 0; }), {"'rms_norm_eps'"});
  ExpectMentions(TargetConfigError([](Json& j) { j["rope_parameters"]["rope_theta"] = 0; }), {"'rope_theta'"});
  ExpectMentions(TargetConfigError([](Json& j) { j["rope_theta"] = -5; }), {"'rope_theta'"});
  // JSON text has no infinity, but GGUF's f32 metadata does.
  ExpectMentions(TargetConfigError([](Json& j) { j["rms_norm_eps"] = std::numeric_limits<double>::infinity(); }),
                 {"'rms_norm_eps'", "finite"});
  ExpectMentions(DraftConfigError([](Json& j) { j["dflash_config"]["final_logit_softcapping"] = -1; }),
                 {"'final_logit_softcapping'"});
}

// The bounds must admit every real model: the largest published shapes parse.
TEST(HostileConfig, LargestRealShapesAreAccepted) {
  Json j = FixtureConfig("qwen3-tiny");
  j.erase("layer_types");  // one per layer of the fixture's 4
  j.update(Json{{"hidden_size", 16384}, {"intermediate_size", 53248}, {"num_hidden_layers", 126},
                {"num_attention_heads", 128}, {"num_key_value_heads", 8}, {"head_dim", 256},
                {"vocab_size", 262144}, {"max_position_embeddings", 10'485'760}});
  const TargetConfig t = TargetConfigFromJson(j, "config.json");
  EXPECT_EQ(t.decoder.hidden_size, 16384);
  EXPECT_EQ(t.decoder.num_layers, 126);
  Json d = FixtureConfig("dflash-tiny");
  d["dflash_config"]["block_size"] = kMaxBlockSize;
  EXPECT_EQ(DraftConfigFromJson(d, "config.json").block_size, kMaxBlockSize);
}

// GGUF metadata reaches the same checks, under the config.json names.
TEST(HostileConfig, GgufMetadataIsBoundedToo) {
  const std::string path = (kTests / "goldens" / "gguf" / "dflash-tiny.dflash.gguf").string();
  const GgufModel good = LoadGguf(path);
  auto error_with = [&](const std::string& key, const Json& value) {
    GgufModel m{good.metadata, TensorStore(path)};
    m.metadata[key] = value;
    return ErrorOf([&] { DraftConfigFromGguf(m, path); });
  };
  ExpectMentions(error_with("dflash.dflash.block_size", 1'000'000), {path, "'block_size'", "1000000"});
  ExpectMentions(error_with("dflash.embedding_length", (uint64_t{1} << 32) + 64), {path, "'hidden_size'", "4294967360"});
  ExpectMentions(error_with("dflash.dflash.mask_token_id", (uint64_t{1} << 32) + 16), {path, "4294967312"});
}

// End to end: the engine refuses the draft before it allocates 7 GB of block buffers.
TEST_F(HostileFiles, EngineRefusesAHugeDraftBlock) {
  const fs::path target = Copy("qwen3-tiny"), draft = Copy("dflash-tiny");
  Json j = ReadJsonFile((draft / "config.json").string());
  j["dflash_config"]["block_size"] = 1'000'000;
  WriteAll(draft / "config.json", j.dump());
  EngineOptions o;
  o.target_dir = target.string();
  o.draft_dir = draft.string();
  o.context = 64;
  o.threads = 1;
  ExpectMentions(ErrorOf([&] { Engine engine(o); }), {"config.json", "block_size", "1000000"});
}

// --- Threads -----------------------------------------------------------------------------

TEST(HostileThreads, AbsurdThreadCountIsAnError) {
  ExpectMentions(ErrorOf([] { ThreadPool pool(100'000); }), {"thread count 100000", "1024"});
  EXPECT_EQ(ThreadPool(3).size(), 3);
}

TEST(HostileThreads, CliRejectsAbsurdThreadCountWithoutAborting) {
  const std::string cmd = std::string(DFLASH_BINARY) + " generate -m " + (kFixtures / "qwen3-tiny").string() +
                          " --prompt-ids 1,2 -n 2 --threads 100000 2>&1 >/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string err;
  char buf[512];
  while (fgets(buf, sizeof buf, p)) err += buf;
  const int status = pclose(p);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status) << ": " << err;
  EXPECT_EQ(WEXITSTATUS(status), 1) << err;
  EXPECT_NE(err.find("100000"), std::string::npos) << err;
}

}  // namespace
}  // namespace dflash
