#include "model/qwen3.h"

#include <algorithm>
#include <cstring>

#include "model/pass_ends.h"
#include "ops/ops.h"

namespace dflash {

Qwen3Model::Qwen3Model(const TargetConfig& config, const TensorStore& store,
                       const TargetOptions& options, ThreadPool& pool)
    : cfg_(config.decoder),
      options_(options),
      pool_(pool),
      rope_(cfg_.rope, cfg_.head_dim, options.kv_capacity),
      kv_layout_(cfg_.num_layers, cfg_.num_kv_heads, cfg_.head_dim, options.kv_capacity, options.kv_type),
      mlp_(cfg_, config.moe, std::max(options.max_rows, 1)) {
  const int64_t H = cfg_.hidden_size, V = cfg_.vocab_size;
  if (options_.max_rows < 1) Fail("target: max_rows must be at least 1");
  if (options_.kv_capacity < 1) Fail("target: kv capacity must be at least 1");
  if (options_.kv_type != DType::kF32 && options_.kv_type != DType::kF16 && options_.kv_type != DType::kBF16)
    Fail("target: KV cache type ", DTypeName(options_.kv_type), " is not f32, f16 or bf16");
  if (options_.kv_type == DType::kBF16 && cfg_.head_dim % 2 != 0)
    Fail(store.origin(), ": a bf16 KV cache pairs head dims, head_dim ", cfg_.head_dim, " is odd (use --kv-type f16)");
  for (int id : options_.capture_layers) {
    if (id < 0 || id >= cfg_.num_layers) Fail(store.origin(), ": capture layer ", id, " out of range");
  }
  embed_ = AsWeight(store.Require("model.embed_tokens.weight", {V, H}));
  if (cfg_.tie_word_embeddings) {
    const Tensor* head = store.Find("lm_head.weight");
    lm_head_ = head ? AsWeight(store.Require("lm_head.weight", {V, H})) : embed_;
  } else {
    lm_head_ = AsWeight(store.Require("lm_head.weight", {V, H}));
  }
  const MoeConfig& moe = config.moe;
  for (int l = 0; l < cfg_.num_layers; ++l) {
    const bool sparse = moe.num_experts > 0 && moe.sparse[l];
    layers_.push_back(LoadDecoderLayer(store, "model.layers." + std::to_string(l), cfg_, sparse ? &moe : nullptr));
    CountExperts(layers_.back().mlp, moe, expert_shape_);
  }
  final_norm_ = ToF32Vector(store.Require("model.norm.weight", {H}));

  q_dim_ = cfg_.num_heads * cfg_.head_dim;
  kv_dim_ = cfg_.num_kv_heads * cfg_.head_dim;
  feature_width_ = static_cast<int>(options_.capture_layers.size()) * cfg_.hidden_size;
  const size_t R = options_.max_rows;
  if (options_.own_cache) own_kv_ = kv_layout_.NewCache();
  x_.resize(R * H);
  xn_.resize(R * std::max<int64_t>(H, q_dim_));
  q_.resize(R * q_dim_);
  k_new_.resize(R * kv_dim_);
  v_new_.resize(R * kv_dim_);
  attn_.resize(R * q_dim_);
  logits_.resize(R * V);
  features_.resize(R * std::max(feature_width_, 1));
  key_begin_.resize(R);
  key_end_.resize(R);
}

std::unique_ptr<TargetState> Qwen3Model::NewState() const {
  return std::make_unique<KvCache>(kv_layout_.NewCache());
}

void Qwen3Model::Bind(TargetState* state) {
  KvCache* next = state ? dynamic_cast<KvCache*>(state) : &own_kv_;
  if (!next || !kv_layout_.Made(*next)) Fail("target: bound state was not made by this model");
  kv_ = next;
}

void Qwen3Model::Truncate(int length) {
  if (length < 0 || length > kv_->filled) Fail("target: cannot truncate KV of ", kv_->filled, " to ", length);
  kv_->filled = length;
}

void Qwen3Model::FillSyntheticKv(int length) {
  if (kv_->k.empty()) Fail("target: FillSyntheticKv without a KV cache bound");
  if (length < 0 || length > options_.kv_capacity) {
    Fail("target: synthetic KV length ", length, " is outside [0, ", options_.kv_capacity, "]");
  }
  kv_layout_.FillSynthetic(*kv_, length);
}

void Qwen3Model::Attention(int layer, int n, StageClock& clock) {
  const DecoderLayerWeights& w = layers_[layer];
  const int pos0 = kv_->filled;
  const int window = cfg_.layer_window[layer];
  uint8_t* k_layer = kv_layout_.Keys(*kv_, layer);
  uint8_t* v_layer = kv_layout_.Values(*kv_, layer);
  ProjectQkv(w, cfg_, rope_, xn_.data(), n, pos0, q_.data(), k_new_.data(), v_new_.data(), pool_, clock, [&](int64_t r) {
    const int pos = pos0 + static_cast<int>(r);
    key_begin_[r] = window > 0 ? std::max(0, pos - window + 1) : 0;
    key_end_[r] = pos + 1;
    kv_layout_.Store(k_new_.data() + r * kv_dim_, 1, pos, /*keys=*/true, k_layer);
    kv_layout_.Store(v_new_.data() + r * kv_dim_, 1, pos, /*keys=*/false, v_layer);
  });
  AttendAndProject(w, cfg_, q_.data(), n, kv_layout_.View(*kv_, layer), key_begin_.data(), key_end_.data(),
                   attn_.data(), xn_.data(), pool_, clock);
}

void Qwen3Model::Forward(std::span<const int32_t> tokens, bool all_logits) {
  const int n = static_cast<int>(tokens.size());
  const int64_t H = cfg_.hidden_size;
  if (n < 1 || n > options_.max_rows) Fail("target: Forward of ", n, " rows (max ", options_.max_rows, ")");
  if (kv_->k.empty()) Fail("target: Forward without a KV cache bound");
  if (kv_->filled + n > options_.kv_capacity) {
    Fail("context full: ", kv_->filled + n, " positions needed, KV cache holds ", options_.kv_capacity);
  }
  StageClock clock(profile_);
  EmbedTokens(embed_, tokens, cfg_.vocab_size, H, x_.data());
  const FeatureCapture capture{options_.capture_layers, H, features_.data()};
  const float eps = static_cast<float>(cfg_.rms_norm_eps);
  const ResidualStream stream{x_.data(), xn_.data(), n, H, eps, pool_};
  experts_read_ = 0;
  RunLayers(std::span<const DecoderLayerWeights>(layers_), stream, &capture, clock,
            [&](int l) { Attention(l, n, clock); },
            [&](int l) { experts_read_ += mlp_.Forward(layers_[l].mlp, xn_.data(), n, pool_, clock); });
  kv_->filled += n;
  if (profile_) profile_->experts_read += experts_read_;
  FinishPass(x_.data(), xn_.data(), n, all_logits, final_norm_, eps, cfg_.num_layers, capture, lm_head_, logits_.data(),
             pool_, clock);
}

int64_t Qwen3Model::DecodeBytes(int ctx) const {
  const auto bytes = [](const WeightRef& w) { return w.rows * static_cast<int64_t>(w.row_bytes); };
  int64_t total = bytes(lm_head_) + static_cast<int64_t>(embed_.row_bytes);
  for (int l = 0; l < cfg_.num_layers; ++l) {
    const DecoderLayerWeights& w = layers_[l];
    for (const WeightRef* m : {&w.q_proj, &w.k_proj, &w.v_proj, &w.o_proj}) total += bytes(*m);
    total += FeedForwardDecodeBytes(w.mlp, expert_shape_.top_k);
    const int window = cfg_.layer_window[l];
    const int64_t keys = window > 0 ? std::min(ctx + 1, window) : ctx + 1;
    total += kv_layout_.ReadBytes(keys);
  }
  return total;
}

}  // namespace dflash
