// Flags shared by the commands that load a model pair and generate (generate, bench, serve):
// declared once, turned into EngineOptions and GenerateOptions in one place.
#pragma once

#include <optional>
#include <string>

#include "args.h"
#include "spec/engine.h"
#include "text/tokenizer.h"

namespace dflash::app {

struct ModelFlags {
  std::string model, draft;
  int ctx = 4096;
  int threads = 0;
  int prefill_chunk = 64;
  int draft_window = 0;
  int draft_sink = 64;
  int block_size = 0;  // 0: the draft's block_size
  std::string target_quant = "none", draft_quant = "none";
  std::string kv_type = "auto";
  bool bf16_dot = false;
  std::string spec_sampling = "rejection";
  std::string mode;    // "" (dflash when a draft is given), "ar", "dflash"
  std::string spec_policy = "adaptive";
  int n_predict = 128;
  double temp = 0, top_p = 1, min_p = 0;
  int top_k = 0;
  unsigned long long seed = 0;
  bool no_eos = false;

  void Declare(Args& args);
  EngineOptions Engine() const;  // throws Error on inconsistent flags
  // Generation options: the checkpoint's defaults, overridden by the flags given.
  GenerateOptions Generation(const Args& args, const dflash::Engine& engine) const;
  bool speculative(const dflash::Engine& engine) const;
};

// The tokenizer that ships with the model (or --tokenizer DIR); none when neither has one.
std::optional<text::Tokenizer> LoadTokenizer(const std::string& flag_dir, const std::string& model_dir);

}  // namespace dflash::app
