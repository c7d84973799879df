#include "model/gguf_config.h"

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

}  // namespace

DraftConfig DraftConfigFromGguf(const GgufModel& model, const std::string& path) {
  const JsonObject meta(model.metadata, path);
  const std::string arch = meta.Get<std::string>("general.architecture");
  if (!IsDflashArchitecture(arch)) {
    Fail(path, ": architecture '", arch, "' is not supported as a draft (supported: dflash, dflash-draft)");
  }
  const std::string p = arch + ".";
  if (meta.Has(p + "attention.sliding_window")) {
    Fail(path, ": ", p, "attention.sliding_window is set; sliding-window drafts are read from "
         "safetensors only (GGUF does not say which layers slide)");
  }
  const Json& ids = model.metadata.value(p + "dflash.target_layer_ids", Json());
  if (!ids.is_array() || ids.empty()) Fail(path, ": metadata '", p, "dflash.target_layer_ids' is missing or empty");
  Json dflash{{"target_layer_ids", ids},
              {"mask_token_id", meta.Get<int64_t>(p + "dflash.mask_token_id")},
              {"block_size", meta.Get<int64_t>(p + "dflash.block_size", 16)}};
  Json cfg = DecoderJson(meta, p);
  cfg["architectures"] = {"DFlashDraftModel"};
  cfg["attention_bias"] = model.store.Find("layers.0.self_attn.q_proj.bias") != nullptr;
  cfg["dflash_config"] = dflash;
  DraftConfig d = DraftConfigFromJson(cfg, path + " (GGUF metadata)");
  const int64_t features = static_cast<int64_t>(d.target_layer_ids.size()) * d.decoder.hidden_size;
  if (meta.Has(p + "dflash.n_target_features") && meta.Get<int64_t>(p + "dflash.n_target_features") != features) {
    Fail(path, ": ", p, "dflash.n_target_features is ", meta.Get<int64_t>(p + "dflash.n_target_features"),
         " but ", d.target_layer_ids.size(), " target layers of ", d.decoder.hidden_size, " make ", features);
  }
  return d;
}

TargetConfig TargetConfigFromGguf(const GgufModel& model, const std::string& path) {
  const JsonObject meta(model.metadata, path);
  const std::string arch = meta.Get<std::string>("general.architecture");
  if (arch != "qwen3") Fail(path, ": architecture '", arch, "' is not supported as a target (supported: qwen3)");
  const std::string p = arch + ".";
  const Tensor* embed = model.store.Find("model.embed_tokens.weight");
  if (!embed || embed->shape.size() != 2) Fail(path, ": tensor 'token_embd.weight' is missing or not 2-D");
  Json cfg = DecoderJson(meta, p);
  cfg["architectures"] = {"Qwen3ForCausalLM"};
  cfg["vocab_size"] = embed->shape[0];
  cfg["tie_word_embeddings"] = model.store.Find("lm_head.weight") == nullptr;
  cfg["attention_bias"] = model.store.Find("model.layers.0.self_attn.q_proj.bias") != nullptr;
  return TargetConfigFromJson(cfg, path + " (GGUF metadata)");
}

}  // namespace dflash
