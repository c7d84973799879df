// Qwen3.5 / Qwen3.6 hybrid decoder (Qwen3_5ForCausalLM, and the text model of
// Qwen3_5ForConditionalGeneration) over memory-mapped HF weights: Gated DeltaNet layers
// (model/gated_deltanet.h) interleaved with gated full attention (q_proj also yields a sigmoid
// output gate; q/k RMSNorm; partial rotary), each followed by a SwiGLU MLP, or in the MoE
// form (Qwen3_5Moe*) by routed experts plus a gated shared expert (model/feed_forward.h). Its
// RMSNorms scale by (1 + weight), folded into the loaded weights.
//
// A sequence's state (HybridState) is the full-attention layers' KV cache plus, per linear
// layer, the conv and recurrent state. Truncate restores exactly: a recurrent state cannot be
// cut back, so each Forward writes the new state beside the old one and logs its rows' inputs;
// a verify that accepts a of its rows replays those a rows onto the old state (the same
// function on the same inputs as the Forward, so the same bits as decoding them one by one).
// Prefix reuse further back restores the longest checkpoint inside the common prefix: one is
// taken at the end of each prompt and one every checkpoint_interval positions (Qwen3.5's
// template drops a reply's reasoning from the next turn's prompt, so a conversation often
// departs from the cached sequence inside the last reply), a ring of them per sequence.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "io/tensor_store.h"
#include "model/feed_forward.h"
#include "model/gated_deltanet.h"
#include "model/kv_cache.h"
#include "model/rope.h"
#include "model/target.h"

namespace dflash {

// The linear layers' conv and recurrent state after the first `length` positions, kept so that
// a later prompt that departs from this sequence after them resumes there.
struct StateCheckpoint {
  int length = -1;  // -1: empty
  std::vector<float> conv, rec;
};

// One sequence's state of a hybrid target.
struct HybridState final : TargetState {
  KvCache kv;                          // the full-attention layers', in layer order; kv.filled = positions
  std::vector<float> conv[2], rec[2];  // every linear layer's, back to back; two copies:
  int current = 0;                     // [current] after all positions, [1 - current] before the last Forward
  int forward_start = 0, forward_rows = 0;  // the last Forward's rows, logged below
  std::vector<float> log_qkv, log_decay, log_beta;  // [linear layer][max_rows][...]
  // A ring of TargetOptions::checkpoints, taken at the end of each prompt (Checkpoint()) and
  // every checkpoint_interval positions; a full ring drops its shortest.
  std::vector<StateCheckpoint> checkpoints;

  size_t bytes() const override;
  int length() const override { return kv.filled; }
  int RestorablePrefix(int length) const override;
  // The longest checkpoint of at most `length` positions (nullptr: none).
  const StateCheckpoint* CheckpointWithin(int length) const;
  // The KV, the state after all positions and the checkpoint: a loaded state restores its
  // length and its checkpoint (not the rows of a Forward before the save).
  void Save(const ByteSink& out) const override;
  void Load(const ByteSource& in) override;
};

class Qwen35Model final : public TargetModel {
 public:
  // `store` must outlive the model (weights are used in place).
  Qwen35Model(const TargetConfig& config, const TensorStore& store, const TargetOptions& options, ThreadPool& pool);

  void Forward(std::span<const int32_t> tokens, bool all_logits) override;
  const float* Logits(int r) const override { return logits_.data() + static_cast<size_t>(r) * cfg_.vocab_size; }
  const float* Features(int r) const override { return features_.data() + static_cast<size_t>(r) * feature_width_; }
  int kv_length() const override { return state_->kv.filled; }
  int kv_capacity() const override { return options_.kv_capacity; }
  void Truncate(int length) override;
  void Checkpoint() override;
  std::unique_ptr<TargetState> NewState() const override;
  void Bind(TargetState* state) override;
  size_t state_bytes() const override;
  size_t checkpoint_bytes() const override;
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

  // The bound state's conv and recurrent state of linear layer `j` (in layer order): what
  // transformers' cache holds, for tests.
  std::span<const float> ConvState(int j) const;
  std::span<const float> RecurrentState(int j) const;

 private:
  struct Layer {
    int slot = 0;  // index among the layers of its kind (KV layer, or linear-state layer)
    GatedDeltaNetWeights linear;                 // linear layers
    WeightRef q_proj, k_proj, v_proj, o_proj;    // full-attention layers
    std::vector<float> q_norm, k_norm;           // (1 + w)
    FeedForwardWeights mlp;
    std::vector<float> input_norm, post_attention_norm;  // (1 + w)
  };

  void Attention(const Layer& w, int n, StageClock& clock);
  GatedDeltaNetState LinearSlot(HybridState& s, int slot) const;
  // Copies the current state into the ring (in place of its shortest checkpoint when full).
  void SaveCheckpoint(HybridState& s) const;

  DecoderConfig cfg_;
  TargetOptions options_;
  ThreadPool& pool_;
  Rope rope_;
  WeightRef embed_, lm_head_;
  std::vector<Layer> layers_;
  std::vector<float> final_norm_;
  int q_dim_, kv_dim_, feature_width_, full_layers_ = 0, linear_layers_ = 0;
  KvLayout kv_layout_;
  GatedDeltaNet deltanet_;

  std::unique_ptr<HybridState> own_state_;  // null unless options.own_cache
  HybridState* state_ = nullptr;            // the bound sequence
  PassProfile* profile_ = nullptr;
  ExpertShape expert_shape_;
  FeedForward mlp_;
  int experts_read_ = 0;  // distinct experts the last Forward read, summed over its layers

  // Scratch, max_rows rows each.
  std::vector<float> x_, xn_;          // [R][H] residual stream, normed input / mixer output
  std::vector<float> qg_;              // [R][heads][2 * head_dim] query | output gate, per head
  std::vector<float> q_, gate_attn_;   // [R][q_dim]
  std::vector<float> k_new_, v_new_;   // [R][kv_dim]
  std::vector<float> attn_;            // [R][q_dim]
  std::vector<float> logits_;          // [R][V]
  std::vector<float> features_;        // [R][F*H]
  std::vector<int32_t> key_begin_, key_end_;
};

}  // namespace dflash
