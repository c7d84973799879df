// A decoder layer's MLP, whichever kind the layer has: the dense SwiGLU MLP, or a
// mixture-of-experts block (model/moe.h). Qwen3 and Qwen3.5 targets, dense or MoE, load and run
// their layers' MLPs through this one choice.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "io/tensor_store.h"
#include "model/config.h"
#include "model/moe.h"
#include "model/pass_profile.h"
#include "model/target.h"

namespace dflash {

struct FeedForwardWeights {
  WeightRef gate_proj, up_proj, down_proj;  // dense: [I, H], [I, H], [H, I]
  MoeWeights moe;                           // sparse: router and experts (else empty)
  bool sparse() const { return !moe.experts.empty(); }
};

// "<prefix>.{gate,up,down}_proj.weight", or with `moe` the MoE block under `prefix` (e.g.
// "model.layers.3.mlp"); errors name the missing or misshapen tensor.
FeedForwardWeights LoadFeedForward(const TensorStore& store, const std::string& prefix, const DecoderConfig& c,
                                   const MoeConfig* moe);

// The bytes one row's pass reads: the dense matrices, or the router, top_k experts and the
// shared expert.
int64_t FeedForwardDecodeBytes(const FeedForwardWeights& w, int top_k);

// Adds w's routed experts to `shape` (a dense layer adds nothing).
void CountExperts(const FeedForwardWeights& w, const MoeConfig& moe, ExpertShape& shape);

// A pass's buffers for every layer's MLP, sized for max_rows rows; one per model.
class FeedForward {
 public:
  FeedForward(const DecoderConfig& c, const MoeConfig& moe, int max_rows);

  // x = the MLP applied to x's n rows ([n][H], in place), its stages charged to `clock`.
  // Returns how many distinct experts the pass read (0 for a dense MLP).
  int Forward(const FeedForwardWeights& w, float* x, int n, ThreadPool& pool, StageClock& clock);

 private:
  int64_t intermediate_;
  std::vector<float> gate_, up_;  // [R][I]
  std::optional<MoeBlock> moe_;
};

}  // namespace dflash
