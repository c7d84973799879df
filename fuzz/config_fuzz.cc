// config.json as a Qwen3 target's and as a DFlash draft's, each next to the tiny fixture
// weights (tests/fixtures), built into an Engine that then generates a few tokens: sizes the
// config names (block size, layers, head_dim) must be refused before they are allocated, and
// an accepted config must mean what its numbers say.
#include <cstdio>

#include "fuzz_support.h"
#include "spec/engine.h"

using namespace dflash;

namespace {

constexpr const char* kTargetFixture = "tests/fixtures/qwen3-tiny";
constexpr const char* kDraftWeights = "tests/fixtures/dflash-tiny/model.safetensors";

// An integer the loader accepted must be the one the file holds, not its value wrapped to
// int (2^32 + 64 read as 64 loads a different model than the file describes).
void CheckField(const Json& config, const char* key, int loaded) {
  const auto it = config.find(key);
  if (it == config.end() || !it->is_number_integer()) return;
  if (it->is_number_unsigned() ? it->get<uint64_t>() != static_cast<uint64_t>(loaded) || loaded < 0
                               : it->get<int64_t>() != loaded) {
    std::fprintf(stderr, "config.json '%s' is %s but was loaded as %d\n", key, it->dump().c_str(), loaded);
    std::abort();
  }
}

void CheckDecoder(const Json& config, const DecoderConfig& d) {
  CheckField(config, "hidden_size", d.hidden_size);
  CheckField(config, "intermediate_size", d.intermediate_size);
  CheckField(config, "num_hidden_layers", d.num_layers);
  CheckField(config, "num_attention_heads", d.num_heads);
  CheckField(config, "num_key_value_heads", d.num_kv_heads);
  CheckField(config, "head_dim", d.head_dim);
  CheckField(config, "max_position_embeddings", d.max_position_embeddings);
}

// Builds the engine and decodes a short prompt, as `dflash generate` would.
void LoadAndGenerate(const std::string& target_dir, const std::string& draft_dir, const Json& config) {
  EngineOptions options;
  options.target_dir = target_dir;
  options.draft_dir = draft_dir;
  options.context = 64;
  options.threads = 1;
  Engine engine(options);
  const DraftConfig* draft = engine.draft_config();
  CheckDecoder(config, draft ? draft->decoder : engine.target_config().decoder);
  GenerateOptions generate;
  generate.max_new_tokens = 4;
  generate.block_size = draft ? draft->block_size : 1;
  const int32_t prompt[] = {1, 2, 3};
  engine.Generate(prompt, generate);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = fuzz::AsText(data, size);
  Json config;  // for the checks only; the loader reads the file itself
  try {
    config = Json::parse(text);
  } catch (const Json::exception&) {
  }
  const std::string scratch = fuzz::ScratchDir().string();

  fuzz::ClearScratch();
  fuzz::WriteScratch("config.json", text);
  fuzz::LinkScratch("model.safetensors", std::string(kTargetFixture) + "/model.safetensors");
  fuzz::ExpectCleanError([&] { LoadAndGenerate(scratch, "", config); });

  fuzz::ClearScratch();
  fuzz::WriteScratch("config.json", text);
  fuzz::LinkScratch("model.safetensors", kDraftWeights);
  fuzz::ExpectCleanError([&] {
    LoadAndGenerate(std::string(DFLASH_SOURCE_DIR) + "/" + kTargetFixture, scratch, config);
  });
  return 0;
}
