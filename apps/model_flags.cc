#include "model_flags.h"

#include <cstdio>
#include <filesystem>

#include "core/error.h"
#include "io/quantize_store.h"
#include "ops/ops.h"

namespace dflash::app {

namespace {
DType ParseKvType(const std::string& text) {
  if (text == "auto") return ops::Bf16DotActive() ? DType::kBF16 : DType::kF16;
  if (text == "f32") return DType::kF32;
  if (text == "f16") return DType::kF16;
  if (text == "bf16") return DType::kBF16;
  Fail("--kv-type must be auto, f32, f16 or bf16, got '", text, "'");
}
}  // namespace

void ModelFlags::Declare(Args& a) {
  a.Option("-m,--model", &model, "DIR", "target model: HF directory (config.json + safetensors) or a Qwen3 .gguf file");
  a.Option("-d,--draft", &draft, "DIR", "DFlash draft directory (z-lab layout); enables --mode dflash");
  a.Option("--mode", &mode, "ar|dflash", "plain autoregressive or DFlash speculative decoding (default: dflash when a draft is given)");
  a.Option("-n,--n-predict", &n_predict, "N", "maximum new tokens");
  a.Option("--temp", &temp, "T", "sampling temperature; 0 = greedy (default: generation_config.json, else 0)");
  a.Option("--top-k", &top_k, "K", "top-k sampling, 0 = off");
  a.Option("--top-p", &top_p, "P", "nucleus sampling, 1 = off");
  a.Option("--min-p", &min_p, "P", "min-p sampling: drop tokens below P times the likeliest, 0 = off");
  a.Option("--presence-penalty", &presence_penalty, "P",
           "subtract P from the logit of every token already generated (OpenAI's presence_penalty, [-2, 2]), 0 = off");
  a.Option("--frequency-penalty", &frequency_penalty, "P",
           "subtract P times its count so far from each generated token's logit (OpenAI's, [-2, 2]), 0 = off");
  a.Option("--repeat-penalty,--repetition-penalty", &repeat_penalty, "R",
           "divide positive logits (multiply negative ones) by R for every token in the prompt or the output "
           "(transformers' repetition_penalty), 1 = off (default: generation_config.json, else 1)");
  a.Option("--seed", &seed, "S", "random seed for sampling");
  a.Option("--block-size", &block_size, "B", "tokens verified per DFlash cycle (default: the draft's block_size)");
  a.Option("--spec-policy", &spec_policy, "adaptive|always",
           "adaptive: speculate only while DFlash is measured to beat plain decoding; always: every step");
  a.Option("--spec-sampling", &spec_sampling, "rejection|reproducible",
           "how sampled DFlash accepts drafts. rejection (default): speculative rejection sampling, accepts the most; "
           "exact in distribution (the target's), but not seed-reproducible across policies: a seed's tokens change "
           "with the verify lengths (block size, and the adaptive policy's timing-driven choices). reproducible: the "
           "same tokens as plain sampling for the same seed, whatever the policy does; accepts fewer drafts");
  a.Flag("--no-eos", &no_eos, "ignore end-of-sequence tokens: always generate -n tokens (benchmarks)");
  a.Option("-c,--ctx", &ctx, "N", "context length per sequence (KV cache positions)");
  a.Option("-t,--threads", &threads, "N", "threads (0 = one per physical core)");
  a.Option("--prefill-chunk", &prefill_chunk, "N", "prompt rows per target forward pass");
  a.Option("--draft-window", &draft_window, "N", "bound the draft's context to a sink plus N recent tokens (0 = unbounded)");
  a.Option("--draft-sink", &draft_sink, "N", "draft context sink size when --draft-window is set");
  a.Option("--ctx-checkpoints", &ctx_checkpoints, "N",
           "hybrid targets (Qwen3.5): recurrent-state checkpoints kept per sequence for prefix reuse (0 = none)");
  a.Option("--ctx-checkpoints-interval", &checkpoint_interval, "N",
           "hybrid targets: also checkpoint every N positions, not only at the end of each prompt (0 = only there)");
  a.Option("--target-quant", &target_quant, "none|q8_0|q4_0|q4_k", "quantise the target's matrices at load time (also the embedding and LM head the draft shares)");
  a.Flag("--bf16-dot", &bf16_dot, "BF16 weights: round activations to bf16 and use native bf16 dot products (AVX512_BF16; faster, not bit-equal to the exact f32 path)");
  a.Option("--kv-type", &kv_type, "auto|f32|f16|bf16",
           "target KV cache element type (like llama.cpp's --cache-type-k/v). auto: bf16 where attention runs on bf16 "
           "dot products (on AMD with AVX512_BF16, and on Intel with AMX-BF16 tiles, by default; DFLASH_BF16_DOT=0/1 "
           "overrides), as a bf16 transformers model "
           "does, else f16; "
           "f32 doubles the cache and is the exact path the transformers goldens check");
  a.Option("--draft-quant", &draft_quant, "auto|none|bf16|q8_0|q4_0|q4_k",
           "quantise the draft's own matrices at load time. auto (default): as the target is quantised (at load or "
           "as stored); none or bf16: as stored");
}

EngineOptions ModelFlags::Engine() const {
  if (model.empty()) Fail("-m/--model is required");
  if (!std::filesystem::exists(model)) Fail(model, ": not found");
  if (!draft.empty() && !std::filesystem::exists(draft)) Fail(draft, ": not found");
  if (!mode.empty() && mode != "ar" && mode != "dflash") Fail("--mode must be 'ar' or 'dflash', got '", mode, "'");
  if (mode == "dflash" && draft.empty()) Fail("--mode dflash needs a draft (-d DIR)");
  if (prefill_chunk < 1) Fail("--prefill-chunk must be at least 1");
  if (draft_window < 0 || draft_sink < 0) Fail("--draft-window and --draft-sink must be >= 0");
  if (ctx_checkpoints < 0 || checkpoint_interval < 0) Fail("--ctx-checkpoints and --ctx-checkpoints-interval must be >= 0");
  EngineOptions e;
  e.target_dir = model;
  e.draft_dir = mode == "ar" ? "" : draft;
  e.context = ctx;
  e.threads = threads;
  e.prefill_chunk = prefill_chunk;
  e.draft_window = draft_window;
  e.draft_sink = draft_sink;
  e.ctx_checkpoints = ctx_checkpoints;
  e.checkpoint_interval = checkpoint_interval;
  e.target_quant = ParseWeightQuant(target_quant, "--target-quant");
  e.draft_quant_follows_target = draft_quant == "auto";
  if (!e.draft_quant_follows_target) e.draft_quant = ParseWeightQuant(draft_quant == "bf16" ? "none" : draft_quant, "--draft-quant");
  e.bf16_activations = bf16_dot;
  e.kv_type = ParseKvType(kv_type);
  return e;
}

std::string WarnIfContextUntrained(const dflash::Engine& engine) {
  const int trained = engine.target_config().decoder.max_position_embeddings;
  const int ctx = engine.options().context;
  if (trained <= 0 || ctx <= trained) return "";
  const std::string warning = "--ctx " + std::to_string(ctx) + " is more than the model's max_position_embeddings " +
                              std::to_string(trained) + ": positions past " + std::to_string(trained) +
                              " were never trained and output there may degrade";
  std::fprintf(stderr, "warning: %s\n", warning.c_str());
  return warning;
}

bool ModelFlags::speculative(const dflash::Engine& engine) const {
  return engine.has_draft() && mode != "ar";
}

GenerateOptions ModelFlags::Generation(const Args& args, const dflash::Engine& engine) const {
  GenerateOptions g;
  g.max_new_tokens = n_predict;
  g.stop_tokens = engine.defaults().eos_tokens;
  g.ignore_stop = no_eos;
  g.sampling = engine.defaults().sampling;
  if (args.Given("--temp")) g.sampling.temperature = temp;
  if (args.Given("--top-k")) g.sampling.top_k = top_k;
  if (args.Given("--top-p")) g.sampling.top_p = top_p;
  if (args.Given("--min-p")) g.sampling.min_p = min_p;
  if (args.Given("--presence-penalty")) g.sampling.presence_penalty = presence_penalty;
  if (args.Given("--frequency-penalty")) g.sampling.frequency_penalty = frequency_penalty;
  if (args.Given("--repetition-penalty")) g.sampling.repetition_penalty = repeat_penalty;
  g.sampling.spec = ParseSpecSampling(spec_sampling);
  g.sampling.seed = seed;
  ValidateSampling(g.sampling);
  g.block_size = 1;
  g.policy = ParseSpecPolicy(spec_policy);
  if (speculative(engine)) {
    g.block_size = block_size > 0 ? block_size : engine.draft_config()->block_size;
    if (g.block_size > 16 && g.block_size > engine.draft_config()->block_size) {
      Fail("--block-size ", g.block_size, " exceeds the draft's block size ", engine.draft_config()->block_size);
    }
  } else if (args.Given("--block-size") && block_size != 1) {
    Fail("--block-size needs a draft (-d DIR)");
  }
  if (n_predict < 1) Fail("-n must be at least 1");
  return g;
}

}  // namespace dflash::app
