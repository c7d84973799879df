// The z-lab DFlash block-diffusion draft. It has no embedding or LM head of its own: it
// borrows the target's. The target's captured layer outputs are fused (fc + hidden_norm)
// into one context vector per committed token, from which every draft layer computes and
// caches context K/V ("KV injection"). A block [anchor, MASK x (B-1)] is then denoised in one
// pass; rows 1..B-1 predict the tokens at their own positions. A DFlash2 draft
// (DraftConfig::dflash2) adds dynamic convolutions around every layer's attention and MLP
// (draft/dflash2_conv.h) and chooses its proposals with a candidate selector
// (draft/dflash2_selector.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "draft/dflash2_conv.h"
#include "draft/dflash2_selector.h"
#include "io/tensor_store.h"
#include "model/config.h"
#include "model/decoder_layer.h"
#include "model/kv_cache.h"
#include "model/rope.h"
#include "model/target.h"
#include "ops/ops.h"
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
  // The context K/V's elements (kF32, kF16 or kBF16): the target's KV type, so the draft's
  // attention reads its cache as the target's does.
  DType kv_type = DType::kF32;
};

// One sequence's draft context: per-layer K/V of the fused target features of its committed
// tokens, with room for a block's own rows after the context, and each row's absolute
// position. K/V are `kv_type` elements (raw bytes), [layer][kv head][row][head_dim] in
// ops::KvView's tiled layout (row r is the cache's position r), which attention reads in place.
struct DraftContext {
  DType type = DType::kF32;
  std::vector<uint8_t> k, v;
  std::vector<int32_t> pos;
  int length = 0;
  TiledHeads shape;  // of k and of v
  size_t bytes() const { return k.size() + v.size() + pos.size() * sizeof(int32_t); }
  // Its `length` rows to a stream, and back into a context of the same draft and options (as
  // TargetState::Save / Load: sizes checked before use; empty after an Error).
  void Save(const ByteSink& out) const;
  void Load(const ByteSource& in);
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
  int selector_top_k() const override { return selector_ ? selector_->top_k() : 0; }
  Candidates SelectAfter(int j, int32_t previous) override;

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
  void LayerAttention(int layer, int B, int pos, StageClock& clock);
  // One layer's keys or values in the bound context, as attention reads them.
  uint8_t* Cache(std::vector<uint8_t>& kv, int layer) const { return kv.data() + static_cast<size_t>(layer) * layer_bytes_; }
  ops::KvView View(int layer) const;
  // n rows ([n][kv_dim] f32) stored as cache rows [row0, row0 + n) of one layer's keys or values.
  void Store(const float* rows, int n, int row0, bool keys, uint8_t* layer_cache) const;
  // Cache rows [from, from + n) of one layer's keys or values moved to [to, to + n), to < from.
  void MoveRows(int from, int to, int n, bool keys, uint8_t* layer_cache) const;

  DraftConfig cfg_;
  DraftOptions options_;
  ThreadPool& pool_;
  const TargetModel& target_;
  Rope rope_;
  int vocab_, q_dim_, kv_dim_, feature_width_, cache_rows_;
  int64_t head_rows_;   // rows per KV head: cache_rows_ in whole key tiles
  size_t layer_bytes_;  // one layer's keys (or values)
  WeightRef fc_;
  std::vector<float> hidden_norm_, final_norm_;
  std::vector<DecoderLayerWeights> layers_;
  std::optional<DynamicConvs> convs_;          // DFlash2 only
  std::optional<CandidateSelector> selector_;  // DFlash2 only

  // Context cache rows: cache_rows_ = capacity + max_block; the block's own K/V sit after
  // the context rows during Propose and are never kept.
  DraftContext own_ctx_;            // empty unless options.own_context
  DraftContext* bound_ = &own_ctx_;   // the bound sequence

  std::vector<float> ctx_;        // [max_append][H] fused context vectors
  std::vector<float> x_, xn_;     // [B][H]
  std::vector<float> q_, attn_;   // [B][q_dim]
  std::vector<float> k_new_, v_new_;  // [max(B, max_append)][kv_dim] rows before the cache stores them
  std::vector<float> gate_, up_;  // [B][I]
  std::vector<float> logits_;     // [B-1][V]
  std::vector<int32_t> key_begin_, key_end_;
};

}  // namespace dflash
