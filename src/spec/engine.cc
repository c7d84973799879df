#include "spec/engine.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include "draft/dflash2_selector.h"
#include "io/json_file.h"
#include "io/quantize_store.h"
#include "model/load.h"

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

// A GGUF's one end-of-sequence token (tokenizer.ggml.eos_token_id); a GGUF has no sampling defaults.
GenerationDefaults GgufGenerationDefaults(const Json& metadata) {
  GenerationDefaults d;
  const Json& eos = metadata.value("tokenizer.ggml.eos_token_id", Json());
  if (eos.is_number_integer()) d.eos_tokens = {eos.get<int32_t>()};
  return d;
}

// Readies a model's matrices for the kernels: quantised if asked (row_lookups: see
// QuantizeMatrices), packed, and marked for bf16 activations if asked.
void PrepareMatrices(TensorStore& store, const std::optional<DType>& quant, bool bf16_activations, ThreadPool& pool,
                     std::span<const std::string> row_lookups = {}) {
  if (quant) QuantizeMatrices(store, *quant, pool, row_lookups);
  PackMatrices(store, pool);
  if (bf16_activations) store.AllowBf16Activations();
}

// The quantisation a draft follows: the target's load-time one, else the block format most of
// its stored matrices have (a GGUF's), as the nearest type the draft can be quantised to
// (Q6_K: Q8_0); nullopt for a float target.
std::optional<DType> TargetQuantisation(const TensorStore& target, const std::optional<DType>& target_quant) {
  if (target_quant) return target_quant;
  std::map<DType, int> matrices;
  for (const std::string& name : target.Names()) {
    const Tensor* t = target.Find(name);
    if (t->shape.size() == 2) ++matrices[t->dtype];
  }
  const auto most = std::max_element(matrices.begin(), matrices.end(),
                                     [](const auto& a, const auto& b) { return a.second < b.second; });
  if (most == matrices.end()) return std::nullopt;
  switch (most->first) {
    case DType::kQ8_0:
    case DType::kQ6_K: return DType::kQ8_0;
    case DType::kQ4_0: return DType::kQ4_0;
    case DType::kQ4_K: return DType::kQ4_K;
    default: return std::nullopt;
  }
}

}  // namespace

GenerationDefaults LoadGenerationDefaults(const ModelSource& source) {
  if (source.gguf_metadata) return GgufGenerationDefaults(*source.gguf_metadata);
  const std::string& model_dir = source.path;
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
    d.sampling.min_p = g.Get<double>("min_p", 0.0);
  }
  // transformers applies the repetition penalty to greedy decoding as well.
  d.sampling.repetition_penalty = g.Get<double>("repetition_penalty", 1.0);
  try {
    ValidateSampling(d.sampling);
  } catch (const Error& e) {
    Fail(path, ": ", e.what());
  }
  return d;
}

Engine::Engine(const EngineOptions& options) : options_(options), pool_(options.threads) {
  LoadedModel<TargetConfig> target = LoadTarget(options.target_dir);
  target_config_ = target.config;
  defaults_ = LoadGenerationDefaults(target.source);
  target_store_.emplace(std::move(target.store));
  if (options.context < 2) Fail("context must be at least 2 tokens, got ", options.context);
  TargetOptions topt;
  topt.kv_capacity = options.context;
  topt.max_rows = std::max(options.prefill_chunk, 16);
  topt.kv_type = options.kv_type;
  topt.checkpoints = options.ctx_checkpoints;
  topt.checkpoint_interval = options.checkpoint_interval;
  topt.own_cache = false;  // every sequence brings its own (Sequence)
  if (!options.draft_dir.empty()) {
    LoadedModel<DraftConfig> draft = LoadDraft(options.draft_dir);
    draft_config_ = draft.config;
    draft_store_.emplace(std::move(draft.store));
    CheckDraftMatchesTarget(draft_config_, target_config_, options.draft_dir);
    topt.max_rows = std::max(topt.max_rows, draft_config_.block_size);
    topt.capture_layers = draft_config_.target_layer_ids;
  }
  if (!options.draft_dir.empty() && !options.draft_quant && options.draft_quant_follows_target) {
    options_.draft_quant = TargetQuantisation(*target_store_, options.target_quant);
  }
  PrepareMatrices(*target_store_, options.target_quant, options.bf16_activations, pool_);
  target_ = NewTargetModel(target_config_, *target_store_, topt, pool_);
  if (!options.draft_dir.empty()) {
    PrepareMatrices(*draft_store_, options_.draft_quant, options.bf16_activations, pool_,
                    CandidateSelector::CodebookNames());
    DraftOptions dopt;
    dopt.max_block = std::max(draft_config_.block_size, 16);
    dopt.context_capacity = options.context;
    dopt.max_append = topt.max_rows;
    dopt.window = options.draft_window;
    dopt.sink = options.draft_sink;
    dopt.own_context = false;
    dopt.kv_type = options.kv_type;
    draft_ = std::make_unique<DFlashDraft>(draft_config_, *draft_store_, *target_, dopt, pool_);
  }
}

// A sequence's turn on the models: the fair lock, then its caches bound.
class Engine::SequenceTurn final : public StepScope {
 public:
  SequenceTurn(Engine& engine, Sequence& seq) : engine_(engine), seq_(seq) {}
  void Enter() override {
    engine_.turn_.lock();
    engine_.target_->Bind(seq_.target.get());
    if (engine_.draft_) engine_.draft_->Bind(&seq_.draft);
  }
  void Leave() override { engine_.turn_.unlock(); }

 private:
  Engine& engine_;
  Sequence& seq_;
};

Sequence Engine::NewSequence() const {
  Sequence s;
  s.target = target_->NewState();
  if (draft_) s.draft = draft_->NewContext();
  return s;
}

int Engine::ReusablePrefix(const Sequence& seq, std::span<const int32_t> prompt) const {
  // A bounded draft context has dropped rows it cannot rebuild, so it can only start over.
  if (draft_ && options_.draft_window > 0) return 0;
  const size_t n = std::min(seq.tokens.size(), prompt.size());
  const size_t common = std::mismatch(seq.tokens.begin(), seq.tokens.begin() + n, prompt.begin()).first - seq.tokens.begin();
  // At least one prompt token must run through the target: its logits pick the first token.
  return seq.target->RestorablePrefix(static_cast<int>(std::min(common, prompt.empty() ? 0 : prompt.size() - 1)));
}

GenerateResult Engine::Continue(Sequence& seq, std::span<const int32_t> prompt, const GenerateOptions& options,
                                const GenerateHooks& hooks) {
  if (hooks.scope) Fail("internal: Engine::Continue brings its own step scope");
  SequenceTurn turn(*this, seq);
  // Sets the caches to the first `length` tokens of `tokens`.
  const auto keep = [&](std::span<const int32_t> tokens, size_t length) {
    turn.Enter();
    target_->Truncate(static_cast<int>(length));
    if (draft_) draft_->TruncateContext(static_cast<int>(length));
    seq.tokens.assign(tokens.begin(), tokens.begin() + length);
    turn.Leave();
  };
  keep(prompt, ReusablePrefix(seq, prompt));
  GenerateHooks with_turns = hooks;
  with_turns.scope = &turn;
  GenerateResult r;
  try {
    r = dflash::Generate(*target_, drafter_override_ ? drafter_override_ : draft_.get(), prompt, options, with_turns);
  } catch (...) {
    keep({}, 0);
    throw;
  }
  // The caches hold the prompt and the output but the last token (not yet run through the
  // target); after a stop token inside an accepted block they hold a few tokens more, which
  // the output does not have: drop those.
  std::vector<int32_t> held(prompt.begin(), prompt.end());
  held.insert(held.end(), r.tokens.begin(), r.tokens.end());
  turn.Enter();
  const size_t length = std::min(held.size(), static_cast<size_t>(target_->kv_length()));
  turn.Leave();
  if (draft_ && options_.draft_window > 0) {
    keep({}, 0);
  } else {
    keep(held, length);
  }
  return r;
}

Sequence& Engine::GenerateSequence() {
  if (!generate_seq_) generate_seq_ = NewSequence();
  return *generate_seq_;
}

GenerateResult Engine::Generate(std::span<const int32_t> prompt, const GenerateOptions& options,
                                const TokenSink& sink) {
  Sequence& seq = GenerateSequence();
  seq.tokens.clear();
  GenerateHooks hooks;
  hooks.sink = sink;
  return Continue(seq, prompt, options, hooks);
}

TargetModel& Engine::target() {
  target_->Bind(GenerateSequence().target.get());
  return *target_;
}

Drafter* Engine::drafter() {
  if (!draft_) return nullptr;
  draft_->Bind(&GenerateSequence().draft);
  return draft_.get();
}

size_t Engine::cache_bytes() const {
  return target_->state_bytes() + (draft_ ? draft_->cache_bytes() : 0);
}

}  // namespace dflash
