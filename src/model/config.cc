#include "model/config.h"

#include <cmath>

namespace dflash {

namespace {

// Upper bounds on hyper-parameters read from files. Generous for any published model (the
// largest, Llama 3.1 405B and the 1T-parameter MoE models, have hidden sizes up to 16384,
// up to 126 layers, 128 heads, head dims up to 256, vocabularies up to 262144, MLP widths up
// to 53248 and contexts up to 10M), yet small enough that every buffer sized by them is
// modest until the weights' shapes confirm them, and that their products (heads x head_dim,
// capture layers x hidden) fit in an int.
constexpr int kMaxHidden = 1 << 16;
constexpr int kMaxIntermediate = 1 << 20;
constexpr int kMaxLayers = 1 << 10;
constexpr int kMaxHeads = 1 << 10;
constexpr int kMaxHeadDim = 1 << 10;
constexpr int kMaxVocab = 1 << 22;
constexpr int kMaxPositions = 1 << 24;

struct Range {
  int64_t lo, hi;
};

int CheckRange(const JsonObject& o, const std::string& key, int64_t v, Range r) {
  if (v < r.lo || v > r.hi) Fail(o.where(), ": field '", key, "' = ", v, " is outside [", r.lo, ", ", r.hi, "]");
  return static_cast<int>(v);
}
// Integers are read as int64 and then bounded, so that 2^32 + 64 is an error, not 64.
int ReadInt(const JsonObject& o, const std::string& key, Range r) {
  return CheckRange(o, key, o.Get<int64_t>(key), r);
}
int ReadInt(const JsonObject& o, const std::string& key, Range r, int64_t fallback) {
  return CheckRange(o, key, o.Get<int64_t>(key, fallback), r);
}

double ReadFinite(const JsonObject& o, const std::string& key, double fallback) {
  const double v = o.Get<double>(key, fallback);
  if (!std::isfinite(v)) Fail(o.where(), ": field '", key, "' = ", v, " is not finite");
  return v;
}
// Scales, epsilons and bases: zero or less is never meaningful and would divide by zero or
// take the log of a non-positive number.
double ReadPositive(const JsonObject& o, const std::string& key, double fallback) {
  const double v = ReadFinite(o, key, fallback);
  if (!(v > 0)) Fail(o.where(), ": field '", key, "' = ", v, " must be positive");
  return v;
}

RopeConfig ParseRope(const JsonObject& cfg) {
  RopeConfig r;
  r.theta = ReadPositive(cfg, "rope_theta", 10000.0);
  // transformers 5 writes rope_parameters (with rope_theta inside); older files rope_scaling.
  const char* key = cfg.Has("rope_parameters") ? "rope_parameters"
                    : cfg.Has("rope_scaling")  ? "rope_scaling"
                                               : nullptr;
  if (!key) return r;
  const JsonObject p = cfg.Child(key);
  r.theta = ReadPositive(p, "rope_theta", r.theta);
  r.type = p.Get<std::string>("rope_type", p.Get<std::string>("type", "default"));
  if (r.type == "default") return r;
  if (r.type != "linear" && r.type != "yarn") {
    Fail(p.where(), ": rope type '", r.type, "' is not supported (default, linear, yarn)");
  }
  const int max_positions = ReadInt(cfg, "max_position_embeddings", {0, kMaxPositions}, 0);
  r.original_max_position_embeddings =
      ReadInt(p, "original_max_position_embeddings", {0, kMaxPositions}, max_positions);
  if (p.Has("factor")) {
    r.factor = ReadPositive(p, "factor", 1.0);
  } else if (r.type == "yarn" && r.original_max_position_embeddings > 0 && max_positions > 0) {
    r.factor = static_cast<double>(max_positions) / r.original_max_position_embeddings;
  } else {
    Fail(p.where(), ": field 'factor' is missing");
  }
  r.beta_fast = ReadFinite(p, "beta_fast", 32.0);
  r.beta_slow = ReadFinite(p, "beta_slow", 1.0);
  r.attention_factor = ReadFinite(p, "attention_factor", -1.0);
  r.mscale = ReadFinite(p, "mscale", 0.0);
  r.mscale_all_dim = ReadFinite(p, "mscale_all_dim", 0.0);
  r.truncate = p.Get<bool>("truncate", true);
  if (r.type == "yarn" && r.original_max_position_embeddings <= 0) {
    Fail(p.where(), ": yarn needs original_max_position_embeddings");
  }
  return r;
}

// dense_mlp false: no layer has a dense MLP (Qwen3.5 MoE), so intermediate_size may be absent.
DecoderConfig ParseDecoder(const JsonObject& cfg, bool need_vocab, bool dense_mlp = true) {
  DecoderConfig d;
  d.vocab_size = need_vocab ? ReadInt(cfg, "vocab_size", {1, kMaxVocab}) : ReadInt(cfg, "vocab_size", {0, kMaxVocab}, 0);
  d.hidden_size = ReadInt(cfg, "hidden_size", {1, kMaxHidden});
  d.intermediate_size = dense_mlp ? ReadInt(cfg, "intermediate_size", {1, kMaxIntermediate})
                                  : ReadInt(cfg, "intermediate_size", {0, kMaxIntermediate}, 0);
  d.num_layers = ReadInt(cfg, "num_hidden_layers", {1, kMaxLayers});
  d.num_heads = ReadInt(cfg, "num_attention_heads", {1, kMaxHeads});
  d.num_kv_heads = ReadInt(cfg, "num_key_value_heads", {1, kMaxHeads}, d.num_heads);
  d.head_dim = ReadInt(cfg, "head_dim", {1, kMaxHeadDim}, d.hidden_size / d.num_heads);
  d.rms_norm_eps = ReadPositive(cfg, "rms_norm_eps", 1e-6);
  d.attention_bias = cfg.Get<bool>("attention_bias", false);
  d.tie_word_embeddings = cfg.Get<bool>("tie_word_embeddings", false);
  d.max_position_embeddings = ReadInt(cfg, "max_position_embeddings", {1, kMaxPositions}, 32768);
  d.rope = ParseRope(cfg);
  if (d.num_heads % d.num_kv_heads != 0) {
    Fail(cfg.where(), ": num_attention_heads ", d.num_heads,
         " is not a multiple of num_key_value_heads ", d.num_kv_heads);
  }
  if (d.head_dim % 2 != 0) Fail(cfg.where(), ": head_dim must be even for rotary embeddings");

  d.layer_window.assign(d.num_layers, 0);
  d.layer_linear.assign(d.num_layers, false);
  if (cfg.Has("layer_types")) {
    const auto types = cfg.Get<std::vector<std::string>>("layer_types");
    if (static_cast<int>(types.size()) != d.num_layers) {
      Fail(cfg.where(), ": layer_types has ", types.size(), " entries for ", d.num_layers,
           " layers");
    }
    for (int i = 0; i < d.num_layers; ++i) {
      if (types[i] == "sliding_attention") {
        d.layer_window[i] = ReadInt(cfg, "sliding_window", {1, kMaxPositions});
      } else if (types[i] == "linear_attention") {
        d.layer_linear[i] = true;
      } else if (types[i] != "full_attention") {
        Fail(cfg.where(), ": layer_types[", i, "] = '", types[i], "' is not supported");
      }
    }
  }
  return d;
}

constexpr int kMaxExperts = 1 << 12;

// Qwen3MoeForCausalLM's experts. transformers 5 writes the expert count as num_local_experts,
// the published configs as num_experts. Layer l is sparse unless listed in mlp_only_layers or
// (l + 1) is not a multiple of decoder_sparse_step, as transformers builds it.
MoeConfig ParseMoe(const JsonObject& cfg, int num_layers) {
  MoeConfig m;
  m.num_experts = ReadInt(cfg, cfg.Has("num_experts") ? "num_experts" : "num_local_experts", {1, kMaxExperts});
  m.top_k = ReadInt(cfg, "num_experts_per_tok", {1, m.num_experts});
  m.intermediate_size = ReadInt(cfg, "moe_intermediate_size", {1, kMaxIntermediate});
  m.norm_topk_prob = cfg.Get<bool>("norm_topk_prob", false);
  const int step = ReadInt(cfg, "decoder_sparse_step", {1, kMaxLayers}, 1);
  m.sparse.assign(num_layers, false);
  for (int l = 0; l < num_layers; ++l) m.sparse[l] = (l + 1) % step == 0;
  for (int l : cfg.Get<std::vector<int>>("mlp_only_layers", {})) {
    if (l < 0 || l >= num_layers) Fail(cfg.where(), ": mlp_only_layers entry ", l, " is outside the ", num_layers, " layers");
    m.sparse[l] = false;
  }
  if (cfg.Get<bool>("use_sliding_window", false)) {
    Fail(cfg.where(), ": use_sliding_window is not supported for Qwen3MoeForCausalLM targets");
  }
  return m;
}

// Qwen3.5 MoE (Qwen3_5MoeTextConfig): every layer has routed experts, their top-k weights
// always renormalised, and a shared expert behind a sigmoid gate.
MoeConfig ParseHybridMoe(const JsonObject& cfg, int num_layers) {
  MoeConfig m;
  m.num_experts = ReadInt(cfg, "num_experts", {1, kMaxExperts});
  m.top_k = ReadInt(cfg, "num_experts_per_tok", {1, m.num_experts});
  m.intermediate_size = ReadInt(cfg, "moe_intermediate_size", {1, kMaxIntermediate});
  m.shared_intermediate_size = ReadInt(cfg, "shared_expert_intermediate_size", {1, kMaxIntermediate});
  m.norm_topk_prob = true;
  m.sparse.assign(num_layers, true);
  return m;
}

std::string Architecture(const JsonObject& cfg) {
  const auto archs = cfg.Get<std::vector<std::string>>("architectures");
  if (archs.size() != 1) Fail(cfg.where(), ": field 'architectures' should name one architecture");
  return archs[0];
}

}  // namespace

std::vector<int> DefaultTargetLayerIds(int num_target_layers, int num_draft_layers) {
  if (num_draft_layers == 1) return {num_target_layers / 2};
  std::vector<int> ids;
  const double span = num_target_layers - 4;
  for (int i = 0; i < num_draft_layers; ++i) {
    // Python's round() rounds half to even; std::nearbyint does too in the default mode.
    ids.push_back(static_cast<int>(std::nearbyint(1 + i * span / (num_draft_layers - 1))));
  }
  return ids;
}

TargetConfig LoadTargetConfig(const std::string& dir) {
  const std::string path = dir + "/config.json";
  return TargetConfigFromJson(ReadJsonFile(path), path);
}

namespace {

// Names a config's linear_attention layer, which only a hybrid architecture has.
void RequireNoLinearLayers(const DecoderConfig& d, const std::string& path, const std::string& arch) {
  for (int i = 0; i < d.num_layers; ++i) {
    if (d.layer_linear[i]) Fail(path, ": layer_types[", i, "] = 'linear_attention' is not supported by ", arch);
  }
}

// Qwen3.5: the text model's fields (nested under text_config in the multimodal checkpoints),
// layer_types defaulting to three linear layers then one full, partial rotary 0.25.
void ParseHybrid(const JsonObject& top, TargetConfig& t) {
  const bool nested = top.Has("text_config");
  const JsonObject cfg = nested ? top.Child("text_config") : top;
  const bool moe = t.architecture.starts_with("Qwen3_5Moe");
  t.hybrid = true;
  t.decoder = ParseDecoder(cfg, /*need_vocab=*/true, /*dense_mlp=*/!moe);
  if (moe) t.moe = ParseHybridMoe(cfg, t.decoder.num_layers);
  DecoderConfig& d = t.decoder;
  if (!cfg.Has("layer_types")) {
    const int interval = ReadInt(cfg, "full_attention_interval", {1, kMaxLayers}, 4);
    for (int i = 0; i < d.num_layers; ++i) d.layer_linear[i] = (i + 1) % interval != 0;
  }
  for (int i = 0; i < d.num_layers; ++i) {
    if (d.layer_window[i] > 0) Fail(cfg.where(), ": layer_types[", i, "] = 'sliding_attention' is not a Qwen3.5 layer");
  }
  // Only this architecture rotates part of a head: transformers' Qwen3 (targets and z-lab's
  // draft layers) ignores the field under default RoPE.
  const char* rope_key = cfg.Has("rope_parameters") ? "rope_parameters" : cfg.Has("rope_scaling") ? "rope_scaling" : nullptr;
  const double outer = ReadPositive(cfg, "partial_rotary_factor", 0.25);
  d.rope.partial_rotary_factor = rope_key ? ReadPositive(cfg.Child(rope_key), "partial_rotary_factor", outer) : outer;
  if (d.rope.partial_rotary_factor > 1) Fail(cfg.where(), ": partial_rotary_factor ", d.rope.partial_rotary_factor, " is above 1");
  const int rotary = static_cast<int>(d.head_dim * d.rope.partial_rotary_factor);
  if (rotary < 2 || rotary % 2 != 0) {
    Fail(cfg.where(), ": partial_rotary_factor ", d.rope.partial_rotary_factor, " x head_dim ", d.head_dim,
         " gives ", rotary, " rotary dims (needs an even number, at least 2)");
  }
  // The multimodal checkpoint ties (or not) at the top level.
  if (nested && top.Has("tie_word_embeddings")) d.tie_word_embeddings = top.Get<bool>("tie_word_embeddings");
  const std::string act = cfg.Get<std::string>("hidden_act", "silu");
  if (act != "silu") Fail(cfg.where(), ": hidden_act '", act, "' is not supported (silu)");
  LinearAttentionConfig& l = t.linear;
  l.conv_kernel = ReadInt(cfg, "linear_conv_kernel_dim", {1, 64}, 4);
  l.num_key_heads = ReadInt(cfg, "linear_num_key_heads", {1, kMaxHeads}, 16);
  l.num_value_heads = ReadInt(cfg, "linear_num_value_heads", {1, kMaxHeads}, 32);
  l.key_head_dim = ReadInt(cfg, "linear_key_head_dim", {1, kMaxHeadDim}, 128);
  l.value_head_dim = ReadInt(cfg, "linear_value_head_dim", {1, kMaxHeadDim}, 128);
  if (l.num_value_heads % l.num_key_heads != 0) {
    Fail(cfg.where(), ": linear_num_value_heads ", l.num_value_heads, " is not a multiple of linear_num_key_heads ",
         l.num_key_heads);
  }
}

}  // namespace

bool IsHybridArchitecture(const std::string& architecture) {
  return architecture == "Qwen3_5ForCausalLM" || architecture == "Qwen3_5ForConditionalGeneration" ||
         architecture == "Qwen3_5MoeForCausalLM" || architecture == "Qwen3_5MoeForConditionalGeneration";
}

TargetConfig TargetConfigFromJson(const Json& j, const std::string& path) {
  const JsonObject cfg(j, path);
  TargetConfig t;
  t.architecture = Architecture(cfg);
  if (IsHybridArchitecture(t.architecture)) {
    ParseHybrid(cfg, t);
    return t;
  }
  const bool moe = t.architecture == "Qwen3MoeForCausalLM";
  if (t.architecture != "Qwen3ForCausalLM" && !moe) {
    Fail(path, ": architecture '", t.architecture,
         "' is not supported as a target (supported: Qwen3ForCausalLM, Qwen3MoeForCausalLM, Qwen3_5ForCausalLM, "
         "Qwen3_5ForConditionalGeneration, Qwen3_5MoeForCausalLM, Qwen3_5MoeForConditionalGeneration)");
  }
  t.decoder = ParseDecoder(cfg, /*need_vocab=*/true);
  RequireNoLinearLayers(t.decoder, path, t.architecture);
  if (moe) t.moe = ParseMoe(cfg, t.decoder.num_layers);
  return t;
}

DraftConfig LoadDraftConfig(const std::string& dir) {
  const std::string path = dir + "/config.json";
  return DraftConfigFromJson(ReadJsonFile(path), path);
}

DraftConfig DraftConfigFromJson(const Json& j, const std::string& path) {
  const JsonObject cfg(j, path);
  const std::string arch = Architecture(cfg);
  if (arch != "DFlashDraftModel" && arch != "DFlash2DraftModel") {
    Fail(path, ": architecture '", arch,
         "' is not supported as a draft (supported: DFlashDraftModel, DFlash2DraftModel)");
  }
  DraftConfig d;
  d.decoder = ParseDecoder(cfg, /*need_vocab=*/false);
  RequireNoLinearLayers(d.decoder, path, arch);
  // Newer configs nest DFlash fields under dflash_config; read there first, then top level.
  const Json empty = Json::object();
  const JsonObject dc = cfg.Has("dflash_config") ? cfg.Child("dflash_config") : JsonObject(empty, path);
  auto pick = [&](const char* key) -> const JsonObject& { return dc.Has(key) ? dc : cfg; };
  d.block_size = ReadInt(pick("block_size"), "block_size", {1, kMaxBlockSize}, 16);
  d.num_target_layers = ReadInt(pick("num_target_layers"), "num_target_layers", {0, kMaxLayers}, 0);
  if (pick("target_layer_ids").Has("target_layer_ids")) {
    const JsonObject& src = pick("target_layer_ids");
    d.target_layer_ids = src.Get<std::vector<int>>("target_layer_ids");
    // One capture per target layer at most: the draft's input is this many hidden states wide.
    if (d.target_layer_ids.size() > kMaxLayers) {
      Fail(src.where(), ": field 'target_layer_ids' has ", d.target_layer_ids.size(), " entries (at most ", kMaxLayers, ")");
    }
  } else {
    if (d.num_target_layers <= 0) Fail(path, ": needs target_layer_ids or num_target_layers");
    d.target_layer_ids = DefaultTargetLayerIds(d.num_target_layers, d.decoder.num_layers);
  }
  if (d.target_layer_ids.empty()) Fail(path, ": target_layer_ids is empty");
  d.mask_token_id = ReadInt(pick("mask_token_id"), "mask_token_id", {0, kMaxVocab - 1});
  d.input_embedding_scale = ReadFinite(pick("input_embedding_scale"), "input_embedding_scale", 1.0);
  d.output_multiplier = ReadFinite(pick("output_multiplier"), "output_multiplier", 1.0);
  d.final_logit_softcapping = ReadFinite(pick("final_logit_softcapping"), "final_logit_softcapping", 0.0);
  if (d.final_logit_softcapping < 0) {
    Fail(pick("final_logit_softcapping").where(), ": field 'final_logit_softcapping' = ", d.final_logit_softcapping,
         " is negative (0 turns it off)");
  }
  if (arch == "DFlash2DraftModel") {
    d.conv_kernel_size = ReadInt(pick("conv_kernel_size"), "conv_kernel_size", {1, kMaxBlockSize});
    d.conv_group_size = ReadInt(pick("conv_group_size"), "conv_group_size", {1, d.decoder.hidden_size});
    if (d.decoder.hidden_size % d.conv_group_size != 0) {
      Fail(pick("conv_group_size").where(), ": field 'conv_group_size' = ", d.conv_group_size,
           " does not divide hidden_size ", d.decoder.hidden_size);
    }
    d.selector_rank = ReadInt(pick("selector_rank"), "selector_rank", {1, kMaxHidden});
    // Bounded by the target's vocabulary in CheckDraftMatchesTarget.
    d.selector_top_k = ReadInt(pick("selector_top_k"), "selector_top_k", {1, kMaxVocab});
  }
  const char* causal_key = dc.Has("causal") ? "causal" : "is_causal";
  const JsonObject& causal_src = dc.Has("causal") ? dc : cfg;
  for (int i = 0; i < d.decoder.num_layers; ++i) {
    const bool sliding = d.decoder.layer_window[i] > 0;
    d.layer_causal.push_back(causal_src.Has(causal_key) ? causal_src.Get<bool>(causal_key) : sliding);
  }
  return d;
}

void CheckDraftMatchesTarget(const DraftConfig& draft, const TargetConfig& target,
                             const std::string& draft_dir) {
  const std::string where = draft_dir + "/config.json";
  const DecoderConfig& t = target.decoder;
  if (draft.decoder.hidden_size != t.hidden_size) {
    Fail(where, ": draft hidden_size ", draft.decoder.hidden_size,
         " does not match the target's hidden_size ", t.hidden_size);
  }
  if (draft.decoder.vocab_size != 0 && draft.decoder.vocab_size != t.vocab_size) {
    Fail(where, ": draft vocab_size ", draft.decoder.vocab_size, " does not match the target's ",
         t.vocab_size);
  }
  if (draft.num_target_layers != 0 && draft.num_target_layers != t.num_layers) {
    Fail(where, ": num_target_layers ", draft.num_target_layers, " but the target has ",
         t.num_layers, " layers");
  }
  for (int id : draft.target_layer_ids) {
    if (id < 0 || id >= t.num_layers) {
      Fail(where, ": target_layer_ids entry ", id, " is outside the target's ", t.num_layers,
           " layers");
    }
  }
  if (draft.selector_top_k > t.vocab_size) {
    Fail(where, ": selector_top_k ", draft.selector_top_k, " exceeds the target vocabulary (", t.vocab_size, ")");
  }
  if (draft.mask_token_id < 0 || draft.mask_token_id >= t.vocab_size) {
    Fail(where, ": mask_token_id ", draft.mask_token_id, " is outside the target vocabulary (",
         t.vocab_size, ")");
  }
}

}  // namespace dflash
