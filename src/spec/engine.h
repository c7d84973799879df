// A loaded model pair ready to generate: the target, an optional DFlash draft, the thread
// pool they share, and the defaults from generation_config.json. Front ends (CLI, server,
// bench) build one of these and call Generate.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/fair_mutex.h"
#include "core/thread_pool.h"
#include "draft/dflash_draft.h"
#include "io/tensor_store.h"
#include "model/config.h"
#include "model/load.h"
#include "model/target.h"
#include "spec/generate.h"

namespace dflash {

struct EngineOptions {
  std::string target_dir;     // HF directory, or a llama.cpp .gguf file
  std::string draft_dir;      // empty: no draft
  int context = 4096;         // KV positions per sequence
  int threads = 0;            // 0: one per physical core
  int prefill_chunk = 64;     // rows per prefill Forward
  int draft_window = 0;       // bounded draft context (0: unbounded)
  int draft_sink = 64;
  // Load-time weight quantisation of each model's matrices (nullopt: as stored). The draft
  // borrows the target's embedding and LM head, so those follow target_quant.
  std::optional<DType> target_quant;
  std::optional<DType> draft_quant;
  // Without a draft_quant, quantise the draft as the target is (at load or as stored, e.g. a
  // Q8_0 GGUF); options() then reports the type chosen. The CLI's default.
  bool draft_quant_follows_target = false;
  // BF16 matrices may round activations to bf16 for native bf16 dot products (AVX512_BF16
  // CPUs only; elsewhere the exact path runs). Results stay batch-invariant, not bit-equal to
  // the exact path.
  bool bf16_activations = false;
  // The target's KV cache elements: kF32 (the library's default, the exact path the goldens
  // check), kF16 (half the bytes; within the goldens' f16 tolerance, tests/golden_test.cc) or
  // kBF16 (attended with bf16 dot products where the CPU has them, ops.h). The CLI's default
  // is bf16 on such CPUs and f16 elsewhere.
  DType kv_type = DType::kF32;
  // A hybrid target's recurrent-state checkpoints per sequence and their spacing (TargetOptions).
  int ctx_checkpoints = TargetOptions().checkpoints;
  int checkpoint_interval = TargetOptions().checkpoint_interval;
};

// Defaults a checkpoint ships in generation_config.json (and config.json's eos_token_id).
struct GenerationDefaults {
  std::vector<int32_t> eos_tokens;
  SamplingParams sampling;  // greedy unless do_sample is true
};

// One sequence's state, apart from the weights: the target's (KV cache, and a hybrid's
// recurrent state), the draft's context and the tokens whose positions both hold (always the
// same positions). A server keeps one per slot.
struct Sequence {
  std::unique_ptr<TargetState> target;
  DraftContext draft;  // empty without a draft
  std::vector<int32_t> tokens;
};

class Engine {
 public:
  explicit Engine(const EngineOptions& options);

  // Clears the caches and generates after `prompt`.
  GenerateResult Generate(std::span<const int32_t> prompt, const GenerateOptions& options,
                          const TokenSink& sink = {});

  Sequence NewSequence() const;
  // Generates after `prompt` in `seq`, reusing the KV and draft context of the longest common
  // prefix of seq.tokens and the prompt (stats.cached_tokens) and prefilling only the rest;
  // greedy output is the same as a fresh Generate's. Afterwards seq holds the prompt and the
  // output. Several threads may call this at once on different sequences: their steps take
  // turns on the models in arrival order. hooks.scope is the engine's own and must be null.
  GenerateResult Continue(Sequence& seq, std::span<const int32_t> prompt, const GenerateOptions& options,
                          const GenerateHooks& hooks = {});
  // How many of the prompt's tokens Continue would reuse from seq: the common prefix, or as
  // much of it as the target state can restore (a hybrid's: its last checkpoint).
  int ReusablePrefix(const Sequence& seq, std::span<const int32_t> prompt) const;

  bool has_draft() const { return draft_ != nullptr; }
  const TargetConfig& target_config() const { return target_config_; }
  const DraftConfig* draft_config() const { return draft_ ? &draft_config_ : nullptr; }
  const GenerationDefaults& defaults() const { return defaults_; }
  const EngineOptions& options() const { return options_; }
  int threads() const { return pool_.size(); }
  ThreadPool& pool() { return pool_; }
  size_t cache_bytes() const;  // one sequence's target state (KV, recurrent) and draft context
  // Direct access for tests and tools, bound to Generate()'s sequence; not while other threads
  // are in Continue.
  TargetModel& target();
  Drafter* drafter();
  // Generate() and Continue() propose through `drafter` instead of the draft (nullptr: the
  // draft itself): `bench --acceptance` runs the draft inside a ScriptedDrafter.
  void set_drafter_override(Drafter* drafter) { drafter_override_ = drafter; }

 private:
  class SequenceTurn;

  EngineOptions options_;
  ThreadPool pool_;
  TargetConfig target_config_;
  DraftConfig draft_config_;
  GenerationDefaults defaults_;
  std::optional<TensorStore> target_store_, draft_store_;
  std::unique_ptr<TargetModel> target_;
  std::unique_ptr<DFlashDraft> draft_;
  Drafter* drafter_override_ = nullptr;
  FairMutex turn_;                     // one sequence's step at a time on the models
  std::optional<Sequence> generate_seq_;  // Generate()'s, made on first use
  Sequence& GenerateSequence();
};

// A model's generation defaults: config.json's and generation_config.json's in a folder, a
// GGUF's eos token id.
GenerationDefaults LoadGenerationDefaults(const ModelSource& source);

}  // namespace dflash
