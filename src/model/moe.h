// The mixture-of-experts MLP of a sparse layer (Qwen3MoeForCausalLM; Qwen3.5 MoE, which adds a
// shared expert): its weights as loaded from either of transformers' layouts, and the block run
// over a pass's rows: router logits, top-k choice, the experts grouped (ops/moe.h), and the
// shared expert scaled by sigmoid(shared_expert_gate x).
#pragma once

#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "io/tensor_store.h"
#include "model/config.h"
#include "ops/moe.h"

namespace dflash {

struct MoeWeights {
  WeightRef router;                         // [E, H] ("<mlp>.gate.weight")
  std::vector<ops::ExpertWeights> experts;  // E, each [I, H], [I, H], [H, I]
  // Qwen3.5 MoE: "<mlp>.shared_expert.*" [S, H], [S, H], [H, S] and its gate [1, H]
  // ("<mlp>.shared_expert_gate.weight"); rows 0 when the layer has none.
  ops::ExpertWeights shared;
  WeightRef shared_gate;
};

// transformers saves a sparse layer's experts either one by one,
// "<mlp>.experts.<e>.{gate,up,down}_proj.weight", or fused ("save_original_format=False"):
// "<mlp>.experts.gate_up_proj" [E, 2I, H] (each expert's gate rows, then its up rows) and
// "<mlp>.experts.down_proj" [E, H, I], under "model.layers" or, for Qwen3.5 MoE's multimodal
// checkpoints, "model.language_model.layers". This replaces fused tensors of every sparse layer in
// `store` by per-expert views of the same bytes, so that everything after loading (quantising,
// packing, LoadMoe) sees one layout. Run it before the matrices are quantised. Errors name the
// tensor whose shape or expert count is wrong.
void SplitFusedExperts(TensorStore& store, const TargetConfig& config);

// Loads and shape-checks "<prefix>.gate.weight", the per-expert matrices under `prefix` (e.g.
// "model.layers.3.mlp") and, when c.shared_intermediate_size, the shared expert and its gate;
// errors name the missing or misshapen tensor, and an expert beyond num_experts.
MoeWeights LoadMoe(const TensorStore& store, const std::string& prefix, const MoeConfig& c, int64_t hidden);

// One routed expert's bytes (every expert has the same shapes and dtypes).
int64_t ExpertBytes(const MoeWeights& w);

// The bytes one row's pass through the block reads: the router, top_k experts and the shared
// expert with its gate.
int64_t MoeDecodeBytes(const MoeWeights& w, int top_k);

// A pass's buffers for the block, sized for max_rows rows; one per model, reused by every layer.
class MoeBlock {
 public:
  MoeBlock(const MoeConfig& c, int64_t hidden, int max_rows);

  // y = the block applied to x's n rows ([n][H]; y may alias x). Returns how many distinct
  // experts the rows chose: how many experts' weights the pass read.
  int Forward(const MoeWeights& w, const float* x, int n, float* y, ThreadPool& pool);
  // The last Forward's choices for row r: top_k expert ids, most probable first.
  const int32_t* choices(int r) const { return ids_.data() + static_cast<size_t>(r) * cfg_.top_k; }
  int top_k() const { return cfg_.top_k; }

 private:
  MoeConfig cfg_;
  std::vector<float> router_logits_;  // [R][E]
  std::vector<int32_t> ids_;          // [R][k]
  std::vector<float> weights_;        // [R][k]
  ops::ExpertScratch scratch_;
  std::vector<float> shared_gate_, shared_up_, shared_out_, shared_scale_;  // [R][S], [R][S], [R][H], [R]
};

}  // namespace dflash
