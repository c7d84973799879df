// Gated DeltaNet, the linear-attention layer of Qwen3.5 hybrids (transformers'
// Qwen3_5GatedDeltaNet): in_proj_qkv -> depthwise causal conv1d (rolling state of kernel - 1
// inputs) -> SiLU -> split q, k, v -> L2-normalised q and k -> per value head the gated delta
// rule over a [key dim][value dim] state, with g = -exp(A_log) * softplus(a + dt_bias) and
// beta = sigmoid(b) -> RMSNorm (plain weight) gated by SiLU(z) -> out_proj.
//
// The layer keeps no state itself: a sequence's conv and recurrent state are passed in
// (GatedDeltaNetState views), and a Forward logs its rows' conv inputs and gates so that the
// state after any prefix of those rows can be rebuilt exactly (Replay) when a verify accepts
// only some of them.
#pragma once

#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "io/tensor_store.h"
#include "model/config.h"
#include "model/pass_profile.h"

namespace dflash {

struct GatedDeltaNetWeights {
  WeightRef in_proj_qkv, in_proj_z, in_proj_b, in_proj_a, out_proj;
  std::vector<float> conv;      // [kernel][conv_dim]: tap j of every channel side by side
  std::vector<float> neg_a;     // [value heads] -exp(A_log)
  std::vector<float> dt_bias;   // [value heads]
  std::vector<float> norm;      // [value head dim] the gated RMSNorm's weight
};

// Loads and shape-checks "<prefix>.linear_attn.*"; errors name the tensor.
GatedDeltaNetWeights LoadGatedDeltaNet(const TensorStore& store, const std::string& prefix, const TargetConfig& c);

// One layer's state buffers for one sequence, and its log of the last Forward's rows.
struct GatedDeltaNetState {
  const float* conv_in;   // [kernel - 1][conv_dim] before the rows
  const float* rec_in;    // [value heads][key dim][value dim] before the rows
  float* conv_out;        // after them (may not alias conv_in)
  float* rec_out;         // after them (may alias rec_in)
  float* log_qkv;         // [max_rows][conv_dim] the rows' conv inputs (in_proj_qkv outputs)
  float* log_decay;       // [max_rows][value heads] exp(g)
  float* log_beta;        // [max_rows][value heads]
};

// The shapes and the per-pass scratch of a model's Gated DeltaNet layers.
class GatedDeltaNet {
 public:
  GatedDeltaNet(const TargetConfig& c, int max_rows, ThreadPool& pool);

  int conv_dim() const { return 2 * key_dim_ + value_dim_; }
  size_t conv_floats() const { return static_cast<size_t>(kernel_ - 1) * conv_dim(); }
  size_t recurrent_floats() const { return static_cast<size_t>(nv_) * dk_ * dv_; }
  int value_heads() const { return nv_; }

  // n rows of normed input xn ([n][hidden]) through the layer; writes out_proj's output
  // ([n][hidden]) to `out` (may alias xn) and logs the rows in `st`. The clock charges the
  // in-projections to kQkv, the state work to kLinearAttention and out_proj to kOProj.
  void Forward(const GatedDeltaNetWeights& w, const float* xn, int n, GatedDeltaNetState& st, float* out,
               StageClock& clock);
  // The state after the first n logged rows: what Forward of those rows alone writes.
  void Replay(const GatedDeltaNetWeights& w, int n, GatedDeltaNetState& st);

 private:
  // Conv + SiLU of the logged rows into mixed_, q and k L2-normalised (q also scaled), and
  // the conv state after them.
  void Mix(const GatedDeltaNetWeights& w, int n, GatedDeltaNetState& st);
  // The delta rule of every value head over n rows; with_output false: the state only.
  void Recur(int n, GatedDeltaNetState& st, bool with_output);

  ThreadPool& pool_;
  int hidden_, kernel_, nk_, nv_, dk_, dv_, key_dim_, value_dim_;
  float eps_;
  std::vector<float> mixed_;  // [R][conv_dim] q | k | v after conv, SiLU and the q/k norms
  std::vector<float> z_;      // [R][value_dim]
  std::vector<float> a_, b_;  // [R][value heads]
  std::vector<float> core_;   // [R][value_dim] the delta rule's output
};

}  // namespace dflash
