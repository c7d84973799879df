#include "model/decoder_layer.h"

#include <cmath>

namespace dflash {

DecoderLayerWeights LoadDecoderLayer(const TensorStore& store, const std::string& prefix,
                                     const DecoderConfig& c, const MoeConfig* moe) {
  const int64_t H = c.hidden_size;
  const int64_t q_dim = static_cast<int64_t>(c.num_heads) * c.head_dim;
  const int64_t kv_dim = static_cast<int64_t>(c.num_kv_heads) * c.head_dim;
  auto matrix = [&](const std::string& name, int64_t rows, int64_t cols) {
    return AsWeight(store.Require(prefix + name, {rows, cols}));
  };
  auto vector = [&](const std::string& name, int64_t n) {
    return ToF32Vector(store.Require(prefix + name, {n}));
  };
  DecoderLayerWeights w;
  w.q_proj = matrix(".self_attn.q_proj.weight", q_dim, H);
  w.k_proj = matrix(".self_attn.k_proj.weight", kv_dim, H);
  w.v_proj = matrix(".self_attn.v_proj.weight", kv_dim, H);
  w.o_proj = matrix(".self_attn.o_proj.weight", H, q_dim);
  w.mlp = LoadFeedForward(store, prefix + ".mlp", c, moe);
  if (c.attention_bias) {
    w.q_bias = vector(".self_attn.q_proj.bias", q_dim);
    w.k_bias = vector(".self_attn.k_proj.bias", kv_dim);
    w.v_bias = vector(".self_attn.v_proj.bias", kv_dim);
    w.o_bias = vector(".self_attn.o_proj.bias", H);
  }
  w.input_norm = vector(".input_layernorm.weight", H);
  w.post_attention_norm = vector(".post_attention_layernorm.weight", H);
  w.q_norm = vector(".self_attn.q_norm.weight", c.head_dim);
  w.k_norm = vector(".self_attn.k_norm.weight", c.head_dim);
  return w;
}

const float* BiasOrNull(const std::vector<float>& bias) { return bias.empty() ? nullptr : bias.data(); }

void ResidualStream::Norm(const std::vector<float>& weight) const {
  pool.ParallelFor(n, [&](int64_t r) { ops::RmsNorm(x + r * hidden, 1, hidden, weight.data(), eps, xn + r * hidden); });
}

void ResidualStream::AddNorm(const std::vector<float>& weight) const {
  pool.ParallelFor(n, [&](int64_t r) {
    ops::AddInPlace(x + r * hidden, xn + r * hidden, hidden);
    ops::RmsNorm(x + r * hidden, 1, hidden, weight.data(), eps, xn + r * hidden);
  });
}

void ResidualStream::Add() const {
  pool.ParallelFor(n, [&](int64_t r) { ops::AddInPlace(x + r * hidden, xn + r * hidden, hidden); });
}

void AttendAndProject(const DecoderLayerWeights& w, const DecoderConfig& c, const float* q, int n,
                      const ops::KvView& kv, const int32_t* key_begin, const int32_t* key_end, float* attn,
                      float* out, ThreadPool& pool, StageClock& clock) {
  const int q_dim = c.num_heads * c.head_dim;
  const ops::AttentionShape shape{c.num_heads, c.num_kv_heads, c.head_dim,
                                  1.0f / std::sqrt(static_cast<float>(c.head_dim))};
  ops::Attention(q, n, q_dim, shape, kv, key_begin, key_end, attn, q_dim, pool);
  clock.Mark(PassStage::kAttention);
  ops::MatMul(attn, n, w.o_proj, BiasOrNull(w.o_bias), out, pool);
  clock.Mark(PassStage::kOProj);
}

}  // namespace dflash
