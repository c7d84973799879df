#include "plan/synthetic_model.h"

#include <cmath>
#include <string>

#include "core/dtype.h"
#include "core/error.h"

namespace dflash::plan {

namespace {

// splitmix64: fast, and every element of a several-GB model costs only a few instructions.
uint64_t Mix(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A bf16 tensor: uniform in [-scale, scale], or all `scale` when constant (norm weights).
void Add(SyntheticWeights& w, const std::string& name, std::vector<int64_t> shape, float scale, uint64_t& state,
         bool constant = false) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<uint16_t>& buf = w.buffers.emplace_back(n);
  for (uint16_t& v : buf) {
    const float u = static_cast<float>(Mix(state) >> 40) * (1.0f / 16777216.0f);  // [0, 1)
    v = F32ToBF16(constant ? scale : scale * (2 * u - 1));
  }
  Tensor t;
  t.name = name;
  t.dtype = DType::kBF16;
  t.shape = std::move(shape);
  t.data = reinterpret_cast<const uint8_t*>(buf.data());
  t.nbytes = n * sizeof(uint16_t);
  t.file = "<synthetic>";
  w.store.Add(std::move(t));
}

DecoderConfig Decoder(const ModelShape& s, int layers, int max_positions) {
  DecoderConfig d;
  d.vocab_size = s.vocab;
  d.hidden_size = s.hidden;
  d.intermediate_size = s.intermediate;
  d.num_layers = layers;
  d.num_heads = s.heads;
  d.num_kv_heads = s.kv_heads;
  d.head_dim = s.head_dim;
  d.attention_bias = s.attention_bias;
  d.tie_word_embeddings = s.tied_embeddings;
  d.max_position_embeddings = max_positions;
  d.rope.theta = 1e6;
  d.layer_window.assign(layers, 0);
  return d;
}

void AddLayers(SyntheticWeights& w, const DecoderConfig& d, const std::string& prefix, uint64_t& state) {
  const int64_t H = d.hidden_size, I = d.intermediate_size, q = int64_t{d.num_heads} * d.head_dim,
                kv = int64_t{d.num_kv_heads} * d.head_dim;
  // Uniform weights of this scale keep each projection's output about the size of its input.
  const float in_h = 1.0f / std::sqrt(float(H)), in_q = 1.0f / std::sqrt(float(q)), in_i = 1.0f / std::sqrt(float(I));
  struct Matrix {
    const char* name;
    int64_t rows, cols;
    float scale;
  };
  const Matrix matrices[] = {{"self_attn.q_proj", q, H, in_h},      {"self_attn.k_proj", kv, H, in_h},
                             {"self_attn.v_proj", kv, H, in_h},     {"self_attn.o_proj", H, q, in_q},
                             {"mlp.gate_proj", I, H, in_h},         {"mlp.up_proj", I, H, in_h},
                             {"mlp.down_proj", H, I, in_i}};
  for (int l = 0; l < d.num_layers; ++l) {
    const std::string p = prefix + std::to_string(l) + ".";
    for (const Matrix& m : matrices) Add(w, p + m.name + ".weight", {m.rows, m.cols}, m.scale, state);
    if (d.attention_bias) {
      for (const char* b : {"q_proj", "k_proj", "v_proj"}) {
        Add(w, p + "self_attn." + b + ".bias", {std::string(b) == "q_proj" ? q : kv}, 0.01f, state);
      }
    }
    for (const char* norm : {"input_layernorm", "post_attention_layernorm"}) Add(w, p + norm + ".weight", {H}, 1.0f, state, true);
    for (const char* norm : {"self_attn.q_norm", "self_attn.k_norm"}) Add(w, p + norm + ".weight", {d.head_dim}, 1.0f, state, true);
  }
}

}  // namespace

void CheckSyntheticShape(const ModelShape& s) {
  if (s.architecture != "Qwen3ForCausalLM" || s.moe || s.linear || s.sliding_layers > 0) {
    Fail("calibration builds dense Qwen3 targets only; ", s.architecture, " is not one (the hybrid and MoE issues add theirs)");
  }
}

SyntheticTarget MakeSyntheticTarget(const ModelShape& s, int layers, int max_positions, uint64_t seed) {
  CheckSyntheticShape(s);
  if (layers < 1 || layers > s.layers) Fail("calibration: ", layers, " layers of a ", s.layers, "-layer target");
  SyntheticTarget t;
  t.config.architecture = s.architecture;
  t.config.decoder = Decoder(s, layers, max_positions);
  uint64_t state = seed;
  Add(t.weights, "model.embed_tokens.weight", {s.vocab, s.hidden}, 1.0f, state);
  if (!s.tied_embeddings) Add(t.weights, "lm_head.weight", {s.vocab, s.hidden}, 1.0f / std::sqrt(float(s.hidden)), state);
  Add(t.weights, "model.norm.weight", {s.hidden}, 1.0f, state, true);
  AddLayers(t.weights, t.config.decoder, "model.layers.", state);
  return t;
}

SyntheticDraft MakeSyntheticDraft(const ModelShape& s, const TargetConfig& target, int layers, uint64_t seed) {
  if (layers < 1 || layers > s.layers) Fail("calibration: ", layers, " layers of a ", s.layers, "-layer draft");
  SyntheticDraft d;
  d.config.decoder = Decoder(s, layers, target.decoder.max_position_embeddings);
  d.config.decoder.vocab_size = 0;
  d.config.block_size = s.block_size;
  d.config.num_target_layers = target.decoder.num_layers;
  d.config.target_layer_ids = {target.decoder.num_layers - 1};
  d.config.mask_token_id = target.decoder.vocab_size - 1;
  d.config.layer_causal.assign(layers, false);
  uint64_t state = seed;
  const int64_t H = s.hidden;
  Add(d.weights, "fc.weight", {H, H}, 1.0f / std::sqrt(float(H)), state);
  Add(d.weights, "hidden_norm.weight", {H}, 1.0f, state, true);
  Add(d.weights, "norm.weight", {H}, 1.0f, state, true);
  AddLayers(d.weights, d.config.decoder, "layers.", state);
  return d;
}

}  // namespace dflash::plan
