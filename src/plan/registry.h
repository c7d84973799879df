// The registry of published DFlash pairs (data/pairs.json): target and draft ids, their shapes
// in config.json's terms, formats, licence, the acceptance z-lab reports and whether
// dflash.cpp runs the pair today. `dflash plan` and `dflash doctor` read it; docs/plan.md
// describes the file. Every number in it names a source; shapes not compared with the
// model's own config.json text are marked unverified.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "io/json_file.h"

namespace dflash::plan {

// Gated DeltaNet (linear attention) layers of hybrid targets: a fixed-size recurrent state
// instead of a KV cache.
struct LinearAttentionShape {
  int key_heads = 0, value_heads = 0, key_head_dim = 0, value_head_dim = 0, conv_kernel = 0;
};

struct MoeShape {
  int experts = 0, experts_per_token = 0, expert_intermediate = 0, shared_intermediate = 0;
};

// A decoder's shape, enough to count its parameters, KV cache and recurrent state.
struct ModelShape {
  std::string architecture;
  int hidden = 0, intermediate = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0, vocab = 0;
  bool tied_embeddings = false;
  bool attention_bias = false;
  bool attention_output_gate = false;  // Qwen3.5: q_proj also produces a gate per head
  int full_attention_layers = 0;       // layers with a KV cache; the rest are linear attention
  int sliding_window = 0, sliding_layers = 0;  // layers whose KV holds only the last window keys
  std::optional<LinearAttentionShape> linear;
  std::optional<MoeShape> moe;
  int capture_layers = 0;  // drafts: target layers concatenated into the draft's fc input
  int block_size = 0;      // drafts
  bool is_draft() const { return capture_layers > 0; }
};

struct ModelRef {
  std::string id;      // Hugging Face repository
  bool verified = false;
  std::string source;  // key into Registry::sources
  std::string config;  // committed config.json, relative to the repository root ("" if none)
  std::string note;
  double params_b = 0;         // published parameter count, billions (0: not recorded)
  double active_params_b = 0;  // MoE: parameters used per token
  ModelShape shape;
};

struct Format {
  std::string format;  // hf-bf16 | mlx-4bit | gguf | hf-mxfp4
  std::string repo;
};

// Accepted tokens per cycle (tau) by task; 0 where not reported.
struct TaskTau {
  double math = 0, code = 0, chat = 0;
  std::string source, note;
};

struct PairEntry {
  std::string name;
  ModelRef target, draft;
  std::vector<Format> formats;
  std::string licence;
  TaskTau tau;
  bool runs_today = false;
  std::string why_not;  // when !runs_today
};

struct AgentFigure {
  double tokens_per_cycle_lo = 0, tokens_per_cycle_hi = 0;
  int context = 0;
  std::string source;
};

struct Registry {
  std::string path;
  std::vector<std::pair<std::string, std::string>> sources;  // key, description
  TaskTau default_tau;  // for pairs without figures of their own
  AgentFigure agent;
  std::vector<PairEntry> pairs;

  const PairEntry* Find(const std::string& name) const;  // nullptr when absent
  std::vector<std::string> Names() const;
};

// Reads and checks the registry: every field typed, every source key defined, shapes positive
// and consistent (heads a multiple of kv heads, full-attention layers within the layers).
// Throws Error naming the file, the pair and the field.
Registry LoadRegistry(const std::string& path);
Registry RegistryFromJson(const Json& j, const std::string& path);

// data/pairs.json of this checkout: $DFLASH_REGISTRY, else found by walking up from the
// running binary (build/bin/dflash -> data/pairs.json). Throws Error saying where it looked.
std::string DefaultRegistryPath();

// The tau of `task` (math|code|chat) for a pair: its own figure, else the registry default.
// `borrowed` says which was used.
double TaskAcceptance(const Registry& r, const PairEntry& p, const std::string& task, bool* borrowed);

}  // namespace dflash::plan
