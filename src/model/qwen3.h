// Qwen3 decoder over memory-mapped HF weights: dense (Qwen3ForCausalLM) or with routed experts
// in its sparse layers (Qwen3MoeForCausalLM).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "io/tensor_store.h"
#include "model/decoder_layer.h"
#include "model/rope.h"
#include "model/target.h"

namespace dflash {

struct TargetOptions {
  int kv_capacity = 4096;         // positions of KV cache reserved (per sequence)
  int max_rows = 64;              // rows per Forward (prefill chunk, verify block)
  // KV cache element type: kF32 (exact, what the transformers goldens are checked at), kF16 or
  // kBF16. A key or value is rounded once, when its position is stored, so every row sees the
  // same cache whatever the batch.
  DType kv_type = DType::kF32;
  std::vector<int> capture_layers;  // 0-based layers whose outputs Features() returns
  // Allocate a KV cache of its own. Without one, Bind() a cache (NewCache) before Forward: an
  // engine serving several sequences keeps one cache per sequence and swaps the pointer.
  bool own_cache = true;
};

// One sequence's keys and values, `type` elements (raw bytes), and how many positions are
// filled. Head-major, [layer][kv head][positions], so that attention, which works one KV head
// at a time, streams each head's positions from contiguous memory, in ops::KvView's tiled
// layout (keys in tiles of ops::kKvTile positions, dim-major inside a tile; values by position;
// a bf16 cache pairs them for bf16 dot products).
struct KvCache {
  DType type = DType::kF32;
  ByteBuffer k, v;
  int length = 0;
  size_t bytes() const { return k.size() + v.size(); }
};

class Qwen3Model final : public TargetModel {
 public:
  // `store` must outlive the model (weights are used in place).
  Qwen3Model(const TargetConfig& config, const TensorStore& store, const TargetOptions& options,
             ThreadPool& pool);

  void Forward(std::span<const int32_t> tokens, bool all_logits) override;
  const float* Logits(int r) const override { return logits_.data() + static_cast<size_t>(r) * cfg_.vocab_size; }
  const float* Features(int r) const override { return features_.data() + static_cast<size_t>(r) * feature_width_; }
  int kv_length() const override { return kv_->length; }
  int kv_capacity() const override { return options_.kv_capacity; }
  void Truncate(int length) override;
  void FillSyntheticKv(int length) override;
  int max_rows() const override { return options_.max_rows; }
  const DecoderConfig& config() const override { return cfg_; }
  std::span<const int> capture_layers() const override { return options_.capture_layers; }
  const WeightRef& embedding() const override { return embed_; }
  const WeightRef& lm_head() const override { return lm_head_; }
  int64_t DecodeBytes(int ctx) const override;
  void set_profile(PassProfile* profile) override { profile_ = profile; }

  // A cache for one sequence, sized for kv_capacity positions; Bind() makes it the one that
  // Forward and Truncate use (nullptr: the model's own, if it has one).
  KvCache NewCache() const;
  void Bind(KvCache* cache);
  size_t kv_bytes() const;  // one sequence's cache

 private:
  void Attention(int layer, int n, StageClock& clock);
  // xn_ = the layer's MLP (dense or routed experts) applied to xn_'s n rows.
  void Mlp(const DecoderLayerWeights& w, int n, StageClock& clock);
  int64_t KvHeadPositions() const;  // positions per head in the cache: kv_capacity in whole key tiles
  size_t KvLayerBytes() const;       // one layer's keys (or values)
  // Stores n rows of kv_dim f32 values ([n][kv_dim], heads side by side) as positions
  // [pos0, pos0 + n) of one layer's keys (tiled) or values.
  void StorePositions(const float* rows, int n, int pos0, bool keys, uint8_t* layer_cache) const;
  // Copies n rows of `layer`'s output into every feature slot that captures it.
  void Capture(int layer, const float* rows, int n);

  DecoderConfig cfg_;
  TargetOptions options_;
  ThreadPool& pool_;
  Rope rope_;
  WeightRef embed_, lm_head_;
  std::vector<DecoderLayerWeights> layers_;
  std::vector<float> final_norm_;
  int q_dim_, kv_dim_, feature_width_;

  KvCache own_kv_;            // empty unless options.own_cache
  KvCache* kv_ = &own_kv_;    // the bound sequence
  PassProfile* profile_ = nullptr;

  // Scratch, max_rows rows each (shapes in the names' comments).
  std::vector<float> x_;         // [R][H] residual stream
  std::vector<float> xn_;        // [R][H] normed input / projection output
  std::vector<float> q_;         // [R][q_dim]
  std::vector<float> k_new_, v_new_;  // [R][kv_dim] new keys/values in f32, before StoreKv
  std::vector<float> attn_;      // [R][q_dim]
  std::vector<float> gate_, up_; // [R][I]
  std::optional<MoeBlock> moe_;  // a MoE target's router and expert buffers
  std::vector<float> logits_;    // [R][V]
  std::vector<float> features_;  // [R][F*H]
  std::vector<int32_t> key_begin_, key_end_;  // [R]
};

}  // namespace dflash
