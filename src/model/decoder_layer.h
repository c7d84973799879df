// Weights of one Qwen3-style pre-norm decoder layer (shared by targets and DFlash drafts):
// RMSNorm -> q/k/v projections with per-head q/k RMSNorm -> attention -> o_proj -> residual,
// RMSNorm -> SwiGLU MLP (or, in a target's sparse layer, routed experts) -> residual.
#pragma once

#include <string>
#include <vector>

#include "core/tensor.h"
#include "io/tensor_store.h"
#include "model/config.h"
#include "model/moe.h"

namespace dflash {

struct DecoderLayerWeights {
  WeightRef q_proj, k_proj, v_proj, o_proj;     // [heads*hd, H], [kv*hd, H], [kv*hd, H], [H, heads*hd]
  WeightRef gate_proj, up_proj, down_proj;      // [I, H], [I, H], [H, I]; absent in a sparse layer
  MoeWeights moe;                               // a sparse layer's router and experts (else empty)
  std::vector<float> q_bias, k_bias, v_bias, o_bias;  // empty unless attention_bias
  std::vector<float> input_norm, post_attention_norm;  // [H]
  std::vector<float> q_norm, k_norm;                   // [head_dim]
};

// Loads and shape-checks "<prefix>.self_attn.q_proj.weight" etc.; errors name the tensor.
// With `moe`, the layer is sparse: "<prefix>.mlp" holds a router and experts (LoadMoe).
DecoderLayerWeights LoadDecoderLayer(const TensorStore& store, const std::string& prefix,
                                     const DecoderConfig& c, const MoeConfig* moe = nullptr);

const float* BiasOrNull(const std::vector<float>& bias);

}  // namespace dflash
