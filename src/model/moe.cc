#include "model/moe.h"

#include <cmath>

#include "ops/ops.h"

namespace dflash {

namespace {

std::string LayerMlp(const std::string& model, int layer) { return model + "layers." + std::to_string(layer) + ".mlp"; }

std::string ExpertMatrix(const std::string& prefix, int e, const char* matrix) {
  return prefix + ".experts." + std::to_string(e) + "." + matrix + ".weight";
}

// A view of `rows` rows of `fused` starting at `row0` (rows of its last dimension), as tensor `name`.
Tensor RowView(const Tensor& fused, const std::string& name, int64_t row0, int64_t rows) {
  const size_t row_bytes = RowBytes(fused.dtype, fused.shape.back());
  Tensor t;
  t.name = name;
  t.dtype = fused.dtype;
  t.shape = {rows, fused.shape.back()};
  t.data = fused.data + static_cast<size_t>(row0) * row_bytes;
  t.nbytes = static_cast<size_t>(rows) * row_bytes;
  t.file = fused.file;
  t.bf16_activations = fused.bf16_activations;
  return t;
}

}  // namespace

void SplitFusedExperts(TensorStore& store, const TargetConfig& config) {
  const MoeConfig& c = config.moe;
  const int64_t H = config.decoder.hidden_size, I = c.intermediate_size, E = c.num_experts;
  const std::string model = store.Find("model.language_model.embed_tokens.weight") ? "model.language_model." : "model.";
  for (int l = 0; l < config.decoder.num_layers; ++l) {
    if (c.sparse.empty() || !c.sparse[l]) continue;
    const std::string prefix = LayerMlp(model, l);
    const std::string gate_up_name = prefix + ".experts.gate_up_proj", down_name = prefix + ".experts.down_proj";
    if (!store.Find(gate_up_name) && !store.Find(down_name)) continue;  // per-expert tensors
    const Tensor& gate_up = store.Require(gate_up_name, {E, 2 * I, H});
    const Tensor& down = store.Require(down_name, {E, H, I});
    for (const Tensor* t : {&gate_up, &down}) {
      if (t->layout != WeightLayout::kRows) Fail(t->file, ": tensor '", t->name, "' is not stored row by row");
    }
    for (int64_t e = 0; e < E; ++e) {
      store.Add(RowView(gate_up, ExpertMatrix(prefix, e, "gate_proj"), e * 2 * I, I));
      store.Add(RowView(gate_up, ExpertMatrix(prefix, e, "up_proj"), e * 2 * I + I, I));
      store.Add(RowView(down, ExpertMatrix(prefix, e, "down_proj"), e * H, H));
    }
    store.Remove(gate_up_name);  // the views point into the mapped file, not into these entries
    store.Remove(down_name);
  }
}

MoeWeights LoadMoe(const TensorStore& store, const std::string& prefix, const MoeConfig& c, int64_t hidden) {
  const int64_t H = hidden, I = c.intermediate_size;
  MoeWeights w;
  w.router = AsWeight(store.Require(prefix + ".gate.weight", {c.num_experts, H}));
  for (int e = 0; e < c.num_experts; ++e) {
    w.experts.push_back({AsWeight(store.Require(ExpertMatrix(prefix, e, "gate_proj"), {I, H})),
                         AsWeight(store.Require(ExpertMatrix(prefix, e, "up_proj"), {I, H})),
                         AsWeight(store.Require(ExpertMatrix(prefix, e, "down_proj"), {H, I}))});
  }
  if (c.shared_intermediate_size > 0) {
    const int64_t S = c.shared_intermediate_size;
    w.shared = {AsWeight(store.Require(prefix + ".shared_expert.gate_proj.weight", {S, H})),
                AsWeight(store.Require(prefix + ".shared_expert.up_proj.weight", {S, H})),
                AsWeight(store.Require(prefix + ".shared_expert.down_proj.weight", {H, S}))};
    w.shared_gate = AsWeight(store.Require(prefix + ".shared_expert_gate.weight", {1, H}));
  }
  for (const char* matrix : {"gate_proj", "up_proj", "down_proj"}) {
    const std::string extra = ExpertMatrix(prefix, c.num_experts, matrix);
    if (const Tensor* t = store.Find(extra)) {
      Fail(t->file, ": tensor '", extra, "' is an expert beyond num_experts ", c.num_experts);
    }
  }
  return w;
}

namespace {
int64_t Bytes(const WeightRef& m) { return m.rows * static_cast<int64_t>(m.row_bytes); }
int64_t Bytes(const ops::ExpertWeights& e) { return Bytes(e.gate) + Bytes(e.up) + Bytes(e.down); }
}  // namespace

int64_t ExpertBytes(const MoeWeights& w) { return Bytes(w.experts.front()); }

int64_t MoeDecodeBytes(const MoeWeights& w, int top_k) {
  return Bytes(w.router) + top_k * ExpertBytes(w) + Bytes(w.shared) + Bytes(w.shared_gate);
}

MoeBlock::MoeBlock(const MoeConfig& c, int64_t hidden, int max_rows)
    : cfg_(c),
      router_logits_(static_cast<size_t>(max_rows) * c.num_experts),
      ids_(static_cast<size_t>(max_rows) * c.top_k),
      weights_(static_cast<size_t>(max_rows) * c.top_k),
      scratch_(max_rows, c.top_k, c.num_experts, hidden, c.intermediate_size),
      shared_gate_(static_cast<size_t>(max_rows) * c.shared_intermediate_size),
      shared_up_(shared_gate_.size()),
      shared_out_(c.shared_intermediate_size > 0 ? static_cast<size_t>(max_rows) * hidden : 0),
      shared_scale_(c.shared_intermediate_size > 0 ? max_rows : 0) {}

int MoeBlock::Forward(const MoeWeights& w, const float* x, int n, float* y, ThreadPool& pool) {
  const int64_t S = cfg_.shared_intermediate_size, H = w.router.cols;
  if (S > 0) {  // from x before y (which may alias it) is written
    // The gate stays unquantised like the router (io/quantize_store.h), so it runs apart from
    // gate and up, which share one quantisation of x.
    const ops::MatMulOutput shared[] = {{&w.shared.gate, nullptr, shared_gate_.data()},
                                        {&w.shared.up, nullptr, shared_up_.data()}};
    ops::MatMulShared(x, n, shared, pool);
    ops::MatMul(x, n, w.shared_gate, nullptr, shared_scale_.data(), pool);
    pool.ParallelFor(n, [&](int64_t r) {
      ops::SiluMul(shared_gate_.data() + r * S, shared_up_.data() + r * S, S, shared_gate_.data() + r * S);
      shared_scale_[r] = 1.0f / (1.0f + std::exp(-shared_scale_[r]));
    });
    ops::MatMul(shared_gate_.data(), n, w.shared.down, nullptr, shared_out_.data(), pool);
  }
  ops::MatMul(x, n, w.router, nullptr, router_logits_.data(), pool);
  ops::RouteTopK(router_logits_.data(), n, cfg_.num_experts, cfg_.top_k, cfg_.norm_topk_prob, ids_.data(),
                 weights_.data());
  const int touched = ops::MixExperts(x, n, w.experts, ids_.data(), weights_.data(), scratch_, y, pool);
  if (S > 0) {  // routed + sigmoid(gate) * shared, as transformers adds them
    pool.ParallelFor(n, [&](int64_t r) {
      float* yr = y + r * H;
      const float* s = shared_out_.data() + r * H;
      for (int64_t h = 0; h < H; ++h) yr[h] += shared_scale_[r] * s[h];
    });
  }
  return touched;
}

}  // namespace dflash
