// Random Qwen3 targets and DFlash drafts built in memory, for tests that need many shapes
// (tiny vocabularies for distribution tests) without files. Tests against the reference
// libraries use the saved fixtures in tests/fixtures instead.
#pragma once

#include <deque>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "io/tensor_store.h"
#include "model/config.h"

namespace dflash::testing {

struct RandomWeights {
  TensorStore store{"<random>"};
  std::deque<std::vector<float>> buffers;  // stable addresses

  void Add(const std::string& name, std::vector<int64_t> shape, std::mt19937& rng, float scale,
           bool ones = false) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::normal_distribution<float> dist(0.0f, scale);
    std::vector<float>& buf = buffers.emplace_back(n);
    for (float& v : buf) v = ones ? 1.0f + 0.1f * dist(rng) : dist(rng);
    Tensor t;
    t.name = name;
    t.dtype = DType::kF32;
    t.shape = std::move(shape);
    t.data = reinterpret_cast<const uint8_t*>(buf.data());
    t.nbytes = n * sizeof(float);
    t.file = "<random>";
    store.Add(std::move(t));
  }
};

inline DecoderConfig SmallDecoder(int vocab, int hidden, int layers) {
  DecoderConfig d;
  d.vocab_size = vocab;
  d.hidden_size = hidden;
  d.intermediate_size = hidden * 2;
  d.num_layers = layers;
  d.num_heads = 4;
  d.num_kv_heads = 2;
  d.head_dim = hidden / 4;
  d.max_position_embeddings = 4096;
  d.layer_window.assign(layers, 0);
  return d;
}

inline void AddLayers(RandomWeights& w, const DecoderConfig& d, const std::string& prefix,
                      std::mt19937& rng, float scale) {
  const int64_t H = d.hidden_size, I = d.intermediate_size, hd = d.head_dim;
  for (int l = 0; l < d.num_layers; ++l) {
    const std::string p = prefix + std::to_string(l);
    w.Add(p + ".self_attn.q_proj.weight", {d.num_heads * hd, H}, rng, scale);
    w.Add(p + ".self_attn.k_proj.weight", {d.num_kv_heads * hd, H}, rng, scale);
    w.Add(p + ".self_attn.v_proj.weight", {d.num_kv_heads * hd, H}, rng, scale);
    w.Add(p + ".self_attn.o_proj.weight", {H, d.num_heads * hd}, rng, scale);
    w.Add(p + ".mlp.gate_proj.weight", {I, H}, rng, scale);
    w.Add(p + ".mlp.up_proj.weight", {I, H}, rng, scale);
    w.Add(p + ".mlp.down_proj.weight", {H, I}, rng, scale);
    w.Add(p + ".input_layernorm.weight", {H}, rng, scale, true);
    w.Add(p + ".post_attention_layernorm.weight", {H}, rng, scale, true);
    w.Add(p + ".self_attn.q_norm.weight", {hd}, rng, scale, true);
    w.Add(p + ".self_attn.k_norm.weight", {hd}, rng, scale, true);
  }
}

struct RandomTarget {
  TargetConfig config;
  RandomWeights weights;
};

inline std::unique_ptr<RandomTarget> MakeRandomTarget(int vocab, int hidden, int layers, uint32_t seed,
                                                      float scale = 0.3f) {
  auto t = std::make_unique<RandomTarget>();
  t->config.architecture = "Qwen3ForCausalLM";
  t->config.decoder = SmallDecoder(vocab, hidden, layers);
  std::mt19937 rng(seed);
  t->weights.Add("model.embed_tokens.weight", {vocab, hidden}, rng, 1.0f);
  t->weights.Add("lm_head.weight", {vocab, hidden}, rng, scale);
  t->weights.Add("model.norm.weight", {hidden}, rng, scale, true);
  AddLayers(t->weights, t->config.decoder, "model.layers.", rng, scale);
  return t;
}

struct RandomDraft {
  DraftConfig config;
  RandomWeights weights;
};

// A draft for `target` with `layers` layers; windows[i] > 0 makes layer i sliding.
inline std::unique_ptr<RandomDraft> MakeRandomDraft(const TargetConfig& target, int layers,
                                                    std::vector<int> target_layer_ids,
                                                    std::vector<int> windows, uint32_t seed) {
  auto d = std::make_unique<RandomDraft>();
  const int H = target.decoder.hidden_size;
  d->config.decoder = SmallDecoder(0, H, layers);
  d->config.decoder.layer_window = windows.empty() ? std::vector<int>(layers, 0) : windows;
  for (int i = 0; i < layers; ++i) d->config.layer_causal.push_back(d->config.decoder.layer_window[i] > 0);
  d->config.block_size = 16;
  d->config.num_target_layers = target.decoder.num_layers;
  d->config.target_layer_ids = std::move(target_layer_ids);
  d->config.mask_token_id = target.decoder.vocab_size - 1;
  std::mt19937 rng(seed);
  const int64_t F = static_cast<int64_t>(d->config.target_layer_ids.size());
  d->weights.Add("fc.weight", {H, F * H}, rng, 0.3f);
  d->weights.Add("hidden_norm.weight", {H}, rng, 0.3f, true);
  d->weights.Add("norm.weight", {H}, rng, 0.3f, true);
  AddLayers(d->weights, d->config.decoder, "layers.", rng, 0.3f);
  return d;
}

}  // namespace dflash::testing
