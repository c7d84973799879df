// Flags shared by the commands that load a model pair and generate (generate, bench, serve):
// declared once, turned into EngineOptions and GenerateOptions in one place.
#pragma once

#include <string>

#include "args.h"
#include "spec/engine.h"

namespace dflash::app {

struct ModelFlags {
  std::string model, draft;
  int ctx = 4096;
  int threads = 0;
  int prefill_chunk = 64;
  int draft_window = 0;
  int draft_sink = 64;
  int ctx_checkpoints = TargetOptions().checkpoints;
  int checkpoint_interval = TargetOptions().checkpoint_interval;
  int block_size = 0;  // 0: the draft's block_size
  std::string target_quant = "none", draft_quant = "auto";
  std::string kv_type = "auto";
  bool bf16_dot = false;
  std::string mode;    // "" (dflash when a draft is given), "ar", "dflash"
  std::string spec_policy = "adaptive";
  std::string spec_sampling = "rejection";
  int n_predict = 128;
  double temp = 0, top_p = 1, min_p = 0;
  double presence_penalty = 0, frequency_penalty = 0, repeat_penalty = 1;
  int top_k = 0;
  unsigned long long seed = 0;
  bool no_eos = false;

  void Declare(Args& args);
  EngineOptions Engine() const;  // throws Error on inconsistent flags or a missing -m/-d path
  // Generation options: the checkpoint's defaults, overridden by the flags given.
  GenerateOptions Generation(const Args& args, const dflash::Engine& engine) const;
  bool speculative(const dflash::Engine& engine) const;
};

// Warns on stderr, as llama.cpp does, when --ctx is beyond the positions the target was trained
// for (its max_position_embeddings); returns that warning, "" when there is none.
std::string WarnIfContextUntrained(const dflash::Engine& engine);

}  // namespace dflash::app
