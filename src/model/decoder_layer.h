// One Qwen3-style pre-norm decoder layer, shared by targets and DFlash drafts:
// RMSNorm -> q/k/v projections with per-head q/k RMSNorm -> attention -> o_proj -> residual,
// RMSNorm -> SwiGLU MLP (or, in a target's sparse layer, routed experts) -> residual.
// Its weights, and the pieces of its pass that every model built from it runs the same way:
// the residual stream's layer loop, the attention's projections and its output.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "core/thread_pool.h"
#include "io/tensor_store.h"
#include "model/config.h"
#include "model/feed_forward.h"
#include "model/pass_ends.h"
#include "model/pass_profile.h"
#include "model/rope.h"
#include "ops/ops.h"

namespace dflash {

struct DecoderLayerWeights {
  WeightRef q_proj, k_proj, v_proj, o_proj;     // [heads*hd, H], [kv*hd, H], [kv*hd, H], [H, heads*hd]
  FeedForwardWeights mlp;                       // dense, or in a target's sparse layer routed experts
  std::vector<float> q_bias, k_bias, v_bias, o_bias;  // empty unless attention_bias
  std::vector<float> input_norm, post_attention_norm;  // [H]
  std::vector<float> q_norm, k_norm;                   // [head_dim]
};

// Loads and shape-checks "<prefix>.self_attn.q_proj.weight" etc.; errors name the tensor.
// With `moe`, the layer is sparse: "<prefix>.mlp" holds a router and experts (LoadFeedForward).
DecoderLayerWeights LoadDecoderLayer(const TensorStore& store, const std::string& prefix,
                                     const DecoderConfig& c, const MoeConfig* moe = nullptr);

const float* BiasOrNull(const std::vector<float>& bias);

// A pass's residual stream over n rows: x ([n][hidden]) sums the sublayers' outputs; a
// sublayer reads its normed input from xn ([n][hidden]) and writes its output there. The
// row-local work runs over the pool by rows: serial, it took 1.5 ms of a 16-row target pass
// at 512 context (6%) while the other threads waited.
struct ResidualStream {
  float* x;
  float* xn;
  int n;
  int64_t hidden;
  float eps;
  ThreadPool& pool;

  void Norm(const std::vector<float>& weight) const;     // xn = RmsNorm(x)
  void AddNorm(const std::vector<float>& weight) const;  // x += xn, then xn = RmsNorm(x)
  void Add() const;                                      // x += xn
};

// The layer loop of a pre-norm decoder: per layer, x += mixer(l)(RmsNorm(x)), then
// x += mlp(l)(RmsNorm(x)); mixer(l) and mlp(l) read xn and write their output to xn. Each layer
// needs `input_norm` and `post_attention_norm`. With a capture, every layer's output but the
// last is copied (the last one's, when captured, is the final norm's: FinishPass).
template <class Layer, class Mixer, class Mlp>
void RunLayers(std::span<const Layer> layers, const ResidualStream& s, const FeatureCapture* capture,
               StageClock& clock, Mixer&& mixer, Mlp&& mlp) {
  const int last = static_cast<int>(layers.size()) - 1;
  s.Norm(layers[0].input_norm);
  for (int l = 0; l <= last; ++l) {
    clock.Mark(PassStage::kOther);
    mixer(l);
    s.AddNorm(layers[l].post_attention_norm);
    clock.Mark(PassStage::kOther);
    mlp(l);
    if (l == last) {
      s.Add();
    } else {
      s.AddNorm(layers[l + 1].input_norm);  // the residual add, then the next layer's input norm
      if (capture) capture->Copy(l, s.x, s.n);
    }
  }
}

// A Qwen3 attention layer's queries, keys and values for n rows at positions pos0, pos0 + 1, ...:
// q ([n][heads * hd]), k and v ([n][kv heads * hd]) from xn by the projections and their
// biases, q and k RMSNormed per head and rotated. Then, on the pool, store(r) for each row
// (the caller keeps row r's k and v in its cache and sets its attention range).
template <class Store>
void ProjectQkv(const DecoderLayerWeights& w, const DecoderConfig& c, const Rope& rope, const float* xn, int n,
                int pos0, float* q, float* k, float* v, ThreadPool& pool, StageClock& clock, Store&& store) {
  const ops::MatMulOutput qkv[] = {{&w.q_proj, BiasOrNull(w.q_bias), q},
                                    {&w.k_proj, BiasOrNull(w.k_bias), k},
                                    {&w.v_proj, BiasOrNull(w.v_bias), v}};
  ops::MatMulShared(xn, n, qkv, pool);
  clock.Mark(PassStage::kQkv);
  const float eps = static_cast<float>(c.rms_norm_eps);
  const size_t q_dim = static_cast<size_t>(c.num_heads) * c.head_dim;
  const size_t kv_dim = static_cast<size_t>(c.num_kv_heads) * c.head_dim;
  pool.ParallelFor(n, [&](int64_t r) {
    float* qr = q + r * q_dim;
    float* kr = k + r * kv_dim;
    ops::RmsNorm(qr, c.num_heads, c.head_dim, w.q_norm.data(), eps, qr);
    ops::RmsNorm(kr, c.num_kv_heads, c.head_dim, w.k_norm.data(), eps, kr);
    rope.Apply(qr, c.num_heads, pos0 + static_cast<int>(r));
    rope.Apply(kr, c.num_kv_heads, pos0 + static_cast<int>(r));
    store(r);
  });
  clock.Mark(PassStage::kOther);
}

// Attention of n query rows over `kv`, row r over keys [key_begin[r], key_end[r]), into attn
// ([n][heads * hd]), then o_proj (and its bias) into out ([n][hidden]).
void AttendAndProject(const DecoderLayerWeights& w, const DecoderConfig& c, const float* q, int n,
                      const ops::KvView& kv, const int32_t* key_begin, const int32_t* key_end, float* attn,
                      float* out, ThreadPool& pool, StageClock& clock);

}  // namespace dflash
