#include "model/gguf_config.h"

#include <algorithm>

#include "core/error.h"

namespace dflash {

namespace {

// The decoder hyper-parameters a target and a draft share, in config.json's terms, so one
// parser validates GGUF and HF checkpoints alike.
Json DecoderJson(const JsonObject& meta, const std::string& p) {
  Json cfg{{"hidden_size", meta.Get<int64_t>(p + "embedding_length")},
           {"intermediate_size", meta.Get<int64_t>(p + "feed_forward_length")},
           {"num_hidden_layers", meta.Get<int64_t>(p + "block_count")},
           {"num_attention_heads", meta.Get<int64_t>(p + "attention.head_count")},
           {"max_position_embeddings", meta.Get<int64_t>(p + "context_length", 32768)},
           {"rms_norm_eps", meta.Get<double>(p + "attention.layer_norm_rms_epsilon", 1e-6)},
           {"rope_theta", meta.Get<double>(p + "rope.freq_base", 10000.0)}};
  if (meta.Has(p + "attention.head_count_kv")) cfg["num_key_value_heads"] = meta.Get<int64_t>(p + "attention.head_count_kv");
  if (meta.Has(p + "attention.key_length")) cfg["head_dim"] = meta.Get<int64_t>(p + "attention.key_length");
  const std::string scaling = meta.Get<std::string>(p + "rope.scaling.type", "none");
  if (scaling == "none") return cfg;
  Json rs{{"rope_type", scaling}};
  if (meta.Has(p + "rope.scaling.factor")) rs["factor"] = meta.Get<double>(p + "rope.scaling.factor");
  if (meta.Has(p + "rope.scaling.original_context_length")) {
    rs["original_max_position_embeddings"] = meta.Get<int64_t>(p + "rope.scaling.original_context_length");
  }
  cfg["rope_scaling"] = rs;
  return cfg;
}

// The DFlash fields in config.json's terms (dflash_config plus the sliding layers). Two layouts:
// llama.cpp's converter (conversion/qwen.py, DFlashModel) writes ARCH.target_layers as hidden-state
// indices (z-lab's target_layer_ids + 1: index 0 is the embeddings), ARCH.block_size,
// tokenizer.ggml.mask_token_id and, for sliding layers, ARCH.attention.sliding_window_pattern;
// the earlier writers ARCH.dflash.{target_layer_ids,mask_token_id,block_size}, z-lab's ids.
void AddDflashFields(const JsonObject& meta, const std::string& p, const std::string& path, Json& cfg) {
  Json dflash = Json::object();
  if (meta.Has(p + "target_layers")) {
    const auto layers = meta.Get<std::vector<int64_t>>(p + "target_layers");
    if (layers.empty()) Fail(path, ": metadata '", p, "target_layers' is empty");
    Json ids = Json::array();
    for (int64_t layer : layers) {
      if (layer < 1) Fail(path, ": metadata '", p, "target_layers' entry ", layer, " is not a layer output (>= 1)");
      ids.push_back(layer - 1);
    }
    dflash["target_layer_ids"] = ids;
    dflash["mask_token_id"] = meta.Get<int64_t>("tokenizer.ggml.mask_token_id");
    dflash["block_size"] = meta.Get<int64_t>(p + "block_size", 16);
  } else {
    const Json& ids = meta.raw().value(p + "dflash.target_layer_ids", Json());
    if (!ids.is_array() || ids.empty()) {
      Fail(path, ": metadata '", p, "target_layers' (or the older '", p, "dflash.target_layer_ids') is missing or empty");
    }
    dflash["target_layer_ids"] = ids;
    dflash["mask_token_id"] = meta.Get<int64_t>(p + "dflash.mask_token_id");
    dflash["block_size"] = meta.Get<int64_t>(p + "dflash.block_size", 16);
  }
  if (meta.Has(p + "attention.causal")) dflash["causal"] = meta.Get<bool>(p + "attention.causal");
  if (meta.Has(p + "logit_scale")) dflash["output_multiplier"] = meta.Get<double>(p + "logit_scale");
  if (meta.Has(p + "final_logit_softcapping")) {
    dflash["final_logit_softcapping"] = meta.Get<double>(p + "final_logit_softcapping");
  }
  if (meta.Has(p + "embedding_scale")) dflash["input_embedding_scale"] = meta.Get<double>(p + "embedding_scale");
  // DFlash2 (dynamic convolutions and the candidate selector): llama.cpp writes all four keys
  // together, and their presence is what tells the architectures apart.
  if (meta.Has(p + "conv_kernel_size") || meta.Has(p + "selector_top_k")) {
    cfg["architectures"] = {"DFlash2DraftModel"};
    for (const char* key : {"conv_kernel_size", "conv_group_size", "selector_rank", "selector_top_k"}) {
      dflash[key] = meta.Get<int64_t>(p + key);
    }
  }
  cfg["dflash_config"] = dflash;

  if (meta.Has(p + "attention.sliding_window")) {
    const Json& pattern = meta.raw().value(p + "attention.sliding_window_pattern", Json());
    if (!pattern.is_array()) {
      Fail(path, ": ", p, "attention.sliding_window is set without a per-layer ", p,
           "attention.sliding_window_pattern (which layers slide is unknown)");
    }
    Json types = Json::array();
    for (const Json& sliding : pattern) {
      if (!sliding.is_boolean()) Fail(path, ": ", p, "attention.sliding_window_pattern holds a non-boolean");
      types.push_back(sliding.get<bool>() ? "sliding_attention" : "full_attention");
    }
    cfg["layer_types"] = types;  // its length is checked against the layer count by the parser
    cfg["sliding_window"] = meta.Get<int64_t>(p + "attention.sliding_window");
  }
}

// What llama.cpp can write for a draft that this engine does not compute: refused by name
// rather than run as a plain DFlash draft.
void RejectUnsupportedDraftFeatures(const JsonObject& meta, const std::string& p, const std::string& path,
                                    int64_t head_dim) {
  if (meta.Has(p + "attention.value_scale")) Fail(path, ": ", p, "attention.value_scale is not supported");
  if (meta.Has(p + "rope.dimension_count") && meta.Get<int64_t>(p + "rope.dimension_count") != head_dim) {
    Fail(path, ": ", p, "rope.dimension_count ", meta.Get<int64_t>(p + "rope.dimension_count"),
         " (partial rotary) differs from the head size ", head_dim);
  }
  // An M-RoPE target's draft: llama.cpp writes [head_dim / 2, 0, 0, 0], i.e. plain RoPE.
  if (meta.Has(p + "rope.dimension_sections")) {
    const auto sections = meta.Get<std::vector<int64_t>>(p + "rope.dimension_sections");
    for (size_t i = 0; i < sections.size(); ++i) {
      if (sections[i] != (i == 0 ? head_dim / 2 : 0)) {
        Fail(path, ": ", p, "rope.dimension_sections is not [", head_dim / 2, ", 0, 0, 0] (plain RoPE)");
      }
    }
  }
}

}  // namespace

DraftConfig DraftConfigFromGguf(const GgufModel& model, const std::string& path) {
  const JsonObject meta(model.metadata, path);
  const std::string arch = meta.Get<std::string>("general.architecture");
  if (!IsDflashArchitecture(arch)) {
    Fail(path, ": architecture '", arch, "' is not supported as a draft (supported: dflash, dflash-draft)");
  }
  const std::string p = arch + ".";
  Json cfg = DecoderJson(meta, p);
  cfg["architectures"] = {"DFlashDraftModel"};
  cfg["attention_bias"] = model.store.Find("layers.0.self_attn.q_proj.bias") != nullptr;
  AddDflashFields(meta, p, path, cfg);
  DraftConfig d = DraftConfigFromJson(cfg, path + " (GGUF metadata)");
  RejectUnsupportedDraftFeatures(meta, p, path, d.decoder.head_dim);
  const int64_t features = static_cast<int64_t>(d.target_layer_ids.size()) * d.decoder.hidden_size;
  if (meta.Has(p + "dflash.n_target_features") && meta.Get<int64_t>(p + "dflash.n_target_features") != features) {
    Fail(path, ": ", p, "dflash.n_target_features is ", meta.Get<int64_t>(p + "dflash.n_target_features"),
         " but ", d.target_layer_ids.size(), " target layers of ", d.decoder.hidden_size, " make ", features);
  }
  return d;
}

namespace {

// qwen3moe: llama.cpp's graph renormalises the top-k weights whatever the checkpoint said
// (its converter writes no norm_topk_prob), so a GGUF means norm_topk_prob true.
void AddMoeFields(const JsonObject& meta, const std::string& p, Json& cfg) {
  cfg["num_experts"] = meta.Get<int64_t>(p + "expert_count");
  cfg["num_experts_per_tok"] = meta.Get<int64_t>(p + "expert_used_count");
  cfg["moe_intermediate_size"] = meta.Get<int64_t>(p + "expert_feed_forward_length");
  cfg["norm_topk_prob"] = meta.Get<bool>(p + "expert_weights_norm", true);
}

// qwen35: layer kinds from attention.recurrent_layers, the Gated DeltaNet shape from ssm.*
// (group_count key heads, time_step_rank value heads, state_size the key head size,
// inner_size all value heads), the rotary width from rope.dimension_count. The M-RoPE
// sections must split exactly the rotary pairs: with text, whose three position ids are equal,
// that is plain RoPE over the rotary dims.
void AddHybridFields(const JsonObject& meta, const std::string& p, const std::string& path, Json& cfg) {
  Json types = Json::array();
  for (bool recurrent : meta.Get<std::vector<bool>>(p + "attention.recurrent_layers")) {
    types.push_back(recurrent ? "linear_attention" : "full_attention");
  }
  cfg["layer_types"] = types;  // its length is checked against the layer count by the parser
  const int64_t nv = meta.Get<int64_t>(p + "ssm.time_step_rank"), inner = meta.Get<int64_t>(p + "ssm.inner_size");
  if (nv < 1 || inner % nv != 0) Fail(path, ": ", p, "ssm.inner_size ", inner, " is not whole heads of ", nv);
  cfg["linear_conv_kernel_dim"] = meta.Get<int64_t>(p + "ssm.conv_kernel");
  cfg["linear_num_key_heads"] = meta.Get<int64_t>(p + "ssm.group_count");
  cfg["linear_num_value_heads"] = nv;
  cfg["linear_key_head_dim"] = meta.Get<int64_t>(p + "ssm.state_size");
  cfg["linear_value_head_dim"] = inner / nv;
  const int64_t head_dim = meta.Get<int64_t>(p + "attention.key_length");
  const int64_t rotary = meta.Get<int64_t>(p + "rope.dimension_count", head_dim / 4);
  cfg["partial_rotary_factor"] = static_cast<double>(rotary) / static_cast<double>(head_dim);
  if (meta.Has(p + "rope.dimension_sections")) {
    int64_t pairs = 0;
    for (int64_t n : meta.Get<std::vector<int64_t>>(p + "rope.dimension_sections")) pairs += n;
    if (2 * pairs != rotary) {
      Fail(path, ": ", p, "rope.dimension_sections cover ", 2 * pairs, " dims, not the ", rotary, " rotary ones (",
           p, "rope.dimension_count)");
    }
  }
}

}  // namespace

TargetConfig TargetConfigFromGguf(const GgufModel& model, const std::string& path) {
  const JsonObject meta(model.metadata, path);
  const std::string arch = meta.Get<std::string>("general.architecture");
  static const std::pair<const char*, const char*> kArchs[] = {
      {"qwen3", "Qwen3ForCausalLM"}, {"qwen3moe", "Qwen3MoeForCausalLM"}, {"qwen35", "Qwen3_5ForCausalLM"}};
  const auto known = std::find_if(std::begin(kArchs), std::end(kArchs), [&](const auto& a) { return arch == a.first; });
  if (known == std::end(kArchs)) {
    Fail(path, ": architecture '", arch, "' is not supported as a target (supported: qwen3, qwen3moe, qwen35)");
  }
  const std::string p = arch + ".";
  const Tensor* embed = model.store.Find("model.embed_tokens.weight");
  if (!embed || embed->shape.size() != 2) Fail(path, ": tensor 'token_embd.weight' is missing or not 2-D");
  Json cfg = DecoderJson(meta, p);
  cfg["architectures"] = {known->second};
  if (arch == "qwen3moe") AddMoeFields(meta, p, cfg);
  if (arch == "qwen35") AddHybridFields(meta, p, path, cfg);
  cfg["vocab_size"] = embed->shape[0];
  cfg["tie_word_embeddings"] = model.store.Find("lm_head.weight") == nullptr;
  cfg["attention_bias"] = model.store.Find("model.layers.0.self_attn.q_proj.bias") != nullptr;
  return TargetConfigFromJson(cfg, path + " (GGUF metadata)");
}

}  // namespace dflash
