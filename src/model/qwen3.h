// Qwen3 decoder over memory-mapped HF weights: dense (Qwen3ForCausalLM) or with routed experts
// in its sparse layers (Qwen3MoeForCausalLM).
#pragma once

#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "io/tensor_store.h"
#include "model/decoder_layer.h"
#include "model/kv_cache.h"
#include "model/rope.h"
#include "model/target.h"

namespace dflash {


class Qwen3Model final : public TargetModel {
 public:
  // `store` must outlive the model (weights are used in place).
  Qwen3Model(const TargetConfig& config, const TensorStore& store, const TargetOptions& options,
             ThreadPool& pool);

  void Forward(std::span<const int32_t> tokens, bool all_logits) override;
  const float* Logits(int r) const override { return logits_.data() + static_cast<size_t>(r) * cfg_.vocab_size; }
  const float* Features(int r) const override { return features_.data() + static_cast<size_t>(r) * feature_width_; }
  int kv_length() const override { return kv_->filled; }
  int kv_capacity() const override { return options_.kv_capacity; }
  void Truncate(int length) override;
  void Checkpoint() override {}  // a KV cache truncates to any length
  std::unique_ptr<TargetState> NewState() const override;
  void Bind(TargetState* state) override;
  size_t state_bytes() const override { return kv_layout_.bytes(); }
  void FillSyntheticKv(int length) override;
  int max_rows() const override { return options_.max_rows; }
  const DecoderConfig& config() const override { return cfg_; }
  std::span<const int> capture_layers() const override { return options_.capture_layers; }
  const WeightRef& embedding() const override { return embed_; }
  const WeightRef& lm_head() const override { return lm_head_; }
  int64_t DecodeBytes(int ctx) const override;
  void set_profile(PassProfile* profile) override { profile_ = profile; }
  int experts_read() const override { return experts_read_; }
  ExpertShape expert_shape() const override { return expert_shape_; }

 private:
  void Attention(int layer, int n, StageClock& clock);

  DecoderConfig cfg_;
  TargetOptions options_;
  ThreadPool& pool_;
  Rope rope_;
  WeightRef embed_, lm_head_;
  std::vector<DecoderLayerWeights> layers_;
  std::vector<float> final_norm_;
  int q_dim_, kv_dim_, feature_width_;
  KvLayout kv_layout_;

  KvCache own_kv_;            // empty unless options.own_cache
  KvCache* kv_ = &own_kv_;    // the bound sequence
  PassProfile* profile_ = nullptr;
  ExpertShape expert_shape_;

  // Scratch, max_rows rows each (shapes in the names' comments).
  std::vector<float> x_;         // [R][H] residual stream
  std::vector<float> xn_;        // [R][H] normed input / projection output
  std::vector<float> q_;         // [R][q_dim]
  std::vector<float> k_new_, v_new_;  // [R][kv_dim] new keys/values in f32, before StoreKv
  std::vector<float> attn_;      // [R][q_dim]
  FeedForward mlp_;              // every layer's MLP buffers
  int experts_read_ = 0;         // distinct experts the last Forward read, summed over its layers
  std::vector<float> logits_;    // [R][V]
  std::vector<float> features_;  // [R][F*H]
  std::vector<int32_t> key_begin_, key_end_;  // [R]
};

}  // namespace dflash
