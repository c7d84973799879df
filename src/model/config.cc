#include "model/config.h"

#include <cmath>

namespace dflash {

namespace {

RopeConfig ParseRope(const JsonObject& cfg) {
  RopeConfig r;
  r.theta = cfg.Get<double>("rope_theta", 10000.0);
  // transformers 5 writes rope_parameters (with rope_theta inside); older files rope_scaling.
  const char* key = cfg.Has("rope_parameters") ? "rope_parameters"
                    : cfg.Has("rope_scaling")  ? "rope_scaling"
                                               : nullptr;
  if (!key) return r;
  const JsonObject p = cfg.Child(key);
  r.theta = p.Get<double>("rope_theta", r.theta);
  r.type = p.Get<std::string>("rope_type", p.Get<std::string>("type", "default"));
  if (r.type == "default") return r;
  if (r.type != "linear" && r.type != "yarn") {
    Fail(p.where(), ": rope type '", r.type, "' is not supported (default, linear, yarn)");
  }
  r.original_max_position_embeddings =
      p.Get<int>("original_max_position_embeddings", cfg.Get<int>("max_position_embeddings", 0));
  if (p.Has("factor")) {
    r.factor = p.Get<double>("factor");
  } else if (r.type == "yarn" && r.original_max_position_embeddings > 0) {
    r.factor = static_cast<double>(cfg.Get<int>("max_position_embeddings")) /
               r.original_max_position_embeddings;
  } else {
    Fail(p.where(), ": field 'factor' is missing");
  }
  if (!(r.factor > 0)) Fail(p.where(), ": field 'factor' must be positive");
  r.beta_fast = p.Get<double>("beta_fast", 32.0);
  r.beta_slow = p.Get<double>("beta_slow", 1.0);
  r.attention_factor = p.Get<double>("attention_factor", -1.0);
  r.mscale = p.Get<double>("mscale", 0.0);
  r.mscale_all_dim = p.Get<double>("mscale_all_dim", 0.0);
  r.truncate = p.Get<bool>("truncate", true);
  if (r.type == "yarn" && r.original_max_position_embeddings <= 0) {
    Fail(p.where(), ": yarn needs original_max_position_embeddings");
  }
  return r;
}

DecoderConfig ParseDecoder(const JsonObject& cfg, bool need_vocab) {
  DecoderConfig d;
  d.vocab_size = need_vocab ? cfg.Get<int>("vocab_size") : cfg.Get<int>("vocab_size", 0);
  d.hidden_size = cfg.Get<int>("hidden_size");
  d.intermediate_size = cfg.Get<int>("intermediate_size");
  d.num_layers = cfg.Get<int>("num_hidden_layers");
  d.num_heads = cfg.Get<int>("num_attention_heads");
  d.num_kv_heads = cfg.Get<int>("num_key_value_heads", d.num_heads);
  if (d.num_heads <= 0) Fail(cfg.where(), ": field 'num_attention_heads' must be positive");
  d.head_dim = cfg.Get<int>("head_dim", d.hidden_size / d.num_heads);
  d.rms_norm_eps = cfg.Get<double>("rms_norm_eps", 1e-6);
  d.attention_bias = cfg.Get<bool>("attention_bias", false);
  d.tie_word_embeddings = cfg.Get<bool>("tie_word_embeddings", false);
  d.max_position_embeddings = cfg.Get<int>("max_position_embeddings", 32768);
  d.rope = ParseRope(cfg);
  const struct {
    const char* name;
    int value;
  } positive[] = {{"hidden_size", d.hidden_size},
                  {"intermediate_size", d.intermediate_size},
                  {"num_hidden_layers", d.num_layers},
                  {"num_key_value_heads", d.num_kv_heads},
                  {"head_dim", d.head_dim}};
  for (const auto& f : positive) {
    if (f.value <= 0) Fail(cfg.where(), ": field '", f.name, "' must be positive, got ", f.value);
  }
  if (need_vocab && d.vocab_size <= 0) Fail(cfg.where(), ": field 'vocab_size' must be positive");
  if (d.num_heads % d.num_kv_heads != 0) {
    Fail(cfg.where(), ": num_attention_heads ", d.num_heads,
         " is not a multiple of num_key_value_heads ", d.num_kv_heads);
  }
  if (d.head_dim % 2 != 0) Fail(cfg.where(), ": head_dim must be even for rotary embeddings");

  d.layer_window.assign(d.num_layers, 0);
  if (cfg.Has("layer_types")) {
    const auto types = cfg.Get<std::vector<std::string>>("layer_types");
    if (static_cast<int>(types.size()) != d.num_layers) {
      Fail(cfg.where(), ": layer_types has ", types.size(), " entries for ", d.num_layers,
           " layers");
    }
    for (int i = 0; i < d.num_layers; ++i) {
      if (types[i] == "sliding_attention") {
        d.layer_window[i] = cfg.Get<int>("sliding_window");
        if (d.layer_window[i] <= 0) Fail(cfg.where(), ": field 'sliding_window' must be positive");
      } else if (types[i] != "full_attention") {
        Fail(cfg.where(), ": layer_types[", i, "] = '", types[i], "' is not supported");
      }
    }
  }
  return d;
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

TargetConfig TargetConfigFromJson(const Json& j, const std::string& path) {
  const JsonObject cfg(j, path);
  TargetConfig t;
  t.architecture = Architecture(cfg);
  if (t.architecture != "Qwen3ForCausalLM") {
    Fail(path, ": architecture '", t.architecture,
         "' is not supported as a target (supported: Qwen3ForCausalLM)");
  }
  t.decoder = ParseDecoder(cfg, /*need_vocab=*/true);
  return t;
}

DraftConfig LoadDraftConfig(const std::string& dir) {
  const std::string path = dir + "/config.json";
  return DraftConfigFromJson(ReadJsonFile(path), path);
}

DraftConfig DraftConfigFromJson(const Json& j, const std::string& path) {
  const JsonObject cfg(j, path);
  const std::string arch = Architecture(cfg);
  if (arch != "DFlashDraftModel") {
    Fail(path, ": architecture '", arch,
         "' is not supported as a draft (supported: DFlashDraftModel)");
  }
  DraftConfig d;
  d.decoder = ParseDecoder(cfg, /*need_vocab=*/false);
  // Newer configs nest DFlash fields under dflash_config; read there first, then top level.
  const Json empty = Json::object();
  const JsonObject dc = cfg.Has("dflash_config") ? cfg.Child("dflash_config") : JsonObject(empty, path);
  auto pick = [&](const char* key) -> const JsonObject& { return dc.Has(key) ? dc : cfg; };
  d.block_size = pick("block_size").Get<int>("block_size", 16);
  if (d.block_size < 1) Fail(path, ": block_size must be at least 1");
  d.num_target_layers = pick("num_target_layers").Get<int>("num_target_layers", 0);
  if (pick("target_layer_ids").Has("target_layer_ids")) {
    d.target_layer_ids = pick("target_layer_ids").Get<std::vector<int>>("target_layer_ids");
  } else {
    if (d.num_target_layers <= 0) Fail(path, ": needs target_layer_ids or num_target_layers");
    d.target_layer_ids = DefaultTargetLayerIds(d.num_target_layers, d.decoder.num_layers);
  }
  if (d.target_layer_ids.empty()) Fail(path, ": target_layer_ids is empty");
  d.mask_token_id = pick("mask_token_id").Get<int>("mask_token_id");
  d.input_embedding_scale = pick("input_embedding_scale").Get<double>("input_embedding_scale", 1.0);
  d.output_multiplier = pick("output_multiplier").Get<double>("output_multiplier", 1.0);
  d.final_logit_softcapping =
      pick("final_logit_softcapping").Get<double>("final_logit_softcapping", 0.0);
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
  if (draft.mask_token_id < 0 || draft.mask_token_id >= t.vocab_size) {
    Fail(where, ": mask_token_id ", draft.mask_token_id, " is outside the target vocabulary (",
         t.vocab_size, ")");
  }
}

}  // namespace dflash
