// The z-lab DFlash block-diffusion draft. It has no embedding or LM head of its own: it
// borrows the target's. The target's captured layer outputs are fused (fc + hidden_norm)
// into one context vector per committed token, from which every draft layer computes and
// caches context K/V ("KV injection"). A block [anchor, MASK x (B-1)] is then denoised in one
// pass; rows 1..B-1 predict the tokens at their own positions.
#pragma once

#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "io/tensor_store.h"
#include "model/config.h"
#include "model/decoder_layer.h"
#include "model/rope.h"
#include "model/target.h"
#include "spec/drafter.h"

namespace dflash {

struct DraftOptions {
  int max_block = 16;       // largest block Propose() accepts
  int context_capacity = 4096;  // context rows the cache can hold before it must drop any
  int max_append = 64;      // rows per AppendContext call
  // Bounded context: keep the first `sink` rows plus the most recent `window` rows
  // (0 = unbounded). Compaction runs when the cache exceeds sink + window + window/2,
  // so between `window` and 1.5 x `window` recent rows are visible at any time.
  int window = 0;
  int sink = 64;
  // Allocate a context of its own; without one, Bind() a context (NewContext) before use.
  bool own_context = true;
};

// One sequence's draft context: per-layer K/V of the fused target features of its committed
// tokens ([layer][row][kv_dim] f32, with room for a block's own rows after the context), and
// each row's absolute position.
struct DraftContext {
  std::vector<float> k, v;
  std::vector<int32_t> pos;
  int length = 0;
  size_t bytes() const { return (k.size() + v.size()) * sizeof(float) + pos.size() * sizeof(int32_t); }
};

class DFlashDraft final : public Drafter {
 public:
  // `store` and `target` must outlive the draft.
  DFlashDraft(const DraftConfig& config, const TensorStore& store, const TargetModel& target,
              const DraftOptions& options, ThreadPool& pool);

  // Adds n committed tokens' target features ([n][F*H]) at positions [pos, pos+n).
  void AppendContext(const float* features, int n, int pos) override;
  // Runs a block of block_size positions after `anchor` (the last committed token, at
  // position pos); Logits(j) for j in [0, proposals) then predicts the token at pos + 1 + j.
  // Only those rows pass through the LM head, the largest matrix.
  void Propose(int32_t anchor, int pos, int block_size, int proposals) override;
  const float* Logits(int j) const override { return logits_.data() + static_cast<size_t>(j) * vocab_; }

  // Forgets context rows at positions >= pos: 0 starts a new sequence; pos > 0 (prefix
  // reuse) needs an unbounded context.
  void TruncateContext(int pos);
  int max_block() const override { return options_.max_block; }
  int max_append() const override { return options_.max_append; }
  int context_rows() const { return bound_->length; }
  const DraftConfig& config() const { return cfg_; }
  // A context for one sequence; Bind() makes it the one in use (nullptr: the draft's own).
  DraftContext NewContext() const;
  void Bind(DraftContext* context);
  size_t cache_bytes() const;  // one sequence's context

 private:
  void Compact();
  void LayerAttention(int layer, int B, int pos);

  DraftConfig cfg_;
  DraftOptions options_;
  ThreadPool& pool_;
  const TargetModel& target_;
  Rope rope_;
  int vocab_, q_dim_, kv_dim_, feature_width_, cache_rows_;
  WeightRef fc_;
  std::vector<float> hidden_norm_, final_norm_;
  std::vector<DecoderLayerWeights> layers_;

  // Context cache rows: cache_rows_ = capacity + max_block; the block's own K/V sit after
  // the context rows during Propose and are never kept.
  DraftContext own_ctx_;            // empty unless options.own_context
  DraftContext* bound_ = &own_ctx_;   // the bound sequence

  std::vector<float> ctx_;        // [max_append][H] fused context vectors
  std::vector<float> x_, xn_;     // [B][H]
  std::vector<float> q_, attn_;   // [B][q_dim]
  std::vector<float> gate_, up_;  // [B][I]
  std::vector<float> logits_;     // [B-1][V]
  std::vector<int32_t> key_begin_, key_end_;
};

}  // namespace dflash
