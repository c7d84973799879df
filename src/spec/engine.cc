#include "spec/engine.h"

#include <filesystem>

#include "io/gguf.h"
#include "io/json_file.h"
#include "io/quantize_store.h"
#include "io/safetensors.h"

namespace dflash {

namespace {

std::vector<int32_t> IdList(const Json& v, const std::string& where) {
  std::vector<int32_t> ids;
  if (v.is_number_integer()) {
    ids.push_back(v.get<int32_t>());
  } else if (v.is_array()) {
    for (const Json& e : v) {
      if (!e.is_number_integer()) Fail(where, ": eos_token_id entries must be integers");
      ids.push_back(e.get<int32_t>());
    }
  } else if (!v.is_null()) {
    Fail(where, ": eos_token_id must be an integer or a list of integers");
  }
  return ids;
}

}  // namespace

GenerationDefaults LoadGenerationDefaults(const std::string& model_dir) {
  GenerationDefaults d;
  const std::string config_path = model_dir + "/config.json";
  const Json config = ReadJsonFile(config_path);
  if (config.contains("eos_token_id")) d.eos_tokens = IdList(config["eos_token_id"], config_path);
  const std::string path = model_dir + "/generation_config.json";
  if (!std::filesystem::exists(path)) return d;
  const Json j = ReadJsonFile(path);
  const JsonObject g(j, path);
  if (g.Has("eos_token_id")) d.eos_tokens = IdList(j["eos_token_id"], path);
  if (g.Get<bool>("do_sample", false)) {
    d.sampling.temperature = g.Get<double>("temperature", 1.0);
    d.sampling.top_k = g.Get<int>("top_k", 0);
    d.sampling.top_p = g.Get<double>("top_p", 1.0);
  }
  return d;
}

Engine::Engine(const EngineOptions& options) : options_(options), pool_(options.threads) {
  if (IsGgufPath(options.target_dir)) {
    GgufModel gguf = LoadGguf(options.target_dir);
    target_config_ = TargetConfigFromGguf(gguf, options.target_dir);
    const Json& eos = gguf.metadata.value("tokenizer.ggml.eos_token_id", Json());
    if (eos.is_number_integer()) defaults_.eos_tokens = {eos.get<int32_t>()};
    target_store_.emplace(std::move(gguf.store));
  } else {
    target_config_ = LoadTargetConfig(options.target_dir);
    defaults_ = LoadGenerationDefaults(options.target_dir);
    target_store_.emplace(LoadSafetensorsDir(options.target_dir));
  }
  if (options.context < 2) Fail("context must be at least 2 tokens, got ", options.context);
  TargetOptions topt;
  topt.kv_capacity = options.context;
  topt.max_rows = std::max(options.prefill_chunk, 16);
  if (IsGgufPath(options.draft_dir)) {
    GgufModel gguf = LoadGguf(options.draft_dir);
    draft_config_ = DraftConfigFromGguf(gguf, options.draft_dir);
    draft_store_.emplace(std::move(gguf.store));
  } else if (!options.draft_dir.empty()) {
    draft_config_ = LoadDraftConfig(options.draft_dir);
    draft_store_.emplace(LoadSafetensorsDir(options.draft_dir));
  }
  if (!options.draft_dir.empty()) {
    CheckDraftMatchesTarget(draft_config_, target_config_, options.draft_dir);
    topt.max_rows = std::max(topt.max_rows, draft_config_.block_size);
    topt.capture_layers = draft_config_.target_layer_ids;
  }
  if (options.target_quant) QuantizeMatrices(*target_store_, *options.target_quant, pool_);
  if (options.bf16_activations) target_store_->AllowBf16Activations();
  target_ = std::make_unique<Qwen3Model>(target_config_, *target_store_, topt, pool_);
  if (!options.draft_dir.empty()) {
    if (options.draft_quant) QuantizeMatrices(*draft_store_, *options.draft_quant, pool_);
    if (options.bf16_activations) draft_store_->AllowBf16Activations();
    DraftOptions dopt;
    dopt.max_block = std::max(draft_config_.block_size, 16);
    dopt.context_capacity = options.context;
    dopt.max_append = topt.max_rows;
    dopt.window = options.draft_window;
    dopt.sink = options.draft_sink;
    draft_ = std::make_unique<DFlashDraft>(draft_config_, *draft_store_, *target_, dopt, pool_);
  }
}

GenerateResult Engine::Generate(std::span<const int32_t> prompt, const GenerateOptions& options,
                                const TokenSink& sink) {
  target_->Truncate(0);
  if (draft_) draft_->TruncateContext(0);
  return dflash::Generate(*target_, draft_.get(), prompt, options, sink);
}

size_t Engine::cache_bytes() const {
  return target_->kv_bytes() + (draft_ ? draft_->cache_bytes() : 0);
}

}  // namespace dflash
