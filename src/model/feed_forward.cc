#include "model/feed_forward.h"

#include "ops/ops.h"

namespace dflash {

FeedForwardWeights LoadFeedForward(const TensorStore& store, const std::string& prefix, const DecoderConfig& c,
                                   const MoeConfig* moe) {
  const int64_t H = c.hidden_size, I = c.intermediate_size;
  FeedForwardWeights w;
  if (moe) {
    w.moe = LoadMoe(store, prefix, *moe, H);
    return w;
  }
  const auto matrix = [&](const char* name, int64_t rows, int64_t cols) {
    return AsWeight(store.Require(prefix + "." + name + ".weight", {rows, cols}));
  };
  w.gate_proj = matrix("gate_proj", I, H);
  w.up_proj = matrix("up_proj", I, H);
  w.down_proj = matrix("down_proj", H, I);
  return w;
}

int64_t FeedForwardDecodeBytes(const FeedForwardWeights& w, int top_k) {
  if (w.sparse()) return MoeDecodeBytes(w.moe, top_k);  // a row reads only its top-k experts
  const auto bytes = [](const WeightRef& m) { return m.rows * static_cast<int64_t>(m.row_bytes); };
  return bytes(w.gate_proj) + bytes(w.up_proj) + bytes(w.down_proj);
}

void CountExperts(const FeedForwardWeights& w, const MoeConfig& moe, ExpertShape& shape) {
  if (!w.sparse()) return;
  shape.experts = moe.num_experts;
  shape.top_k = moe.top_k;
  ++shape.sparse_layers;
  shape.decode_bytes += moe.top_k * ExpertBytes(w.moe);
}

FeedForward::FeedForward(const DecoderConfig& c, const MoeConfig& moe, int max_rows)
    : intermediate_(c.intermediate_size),
      gate_(static_cast<size_t>(max_rows) * c.intermediate_size),
      up_(gate_.size()) {
  if (moe.num_experts > 0) moe_.emplace(moe, c.hidden_size, max_rows);
}

int FeedForward::Forward(const FeedForwardWeights& w, float* x, int n, ThreadPool& pool, StageClock& clock) {
  if (w.sparse()) {
    const int experts = moe_->Forward(w.moe, x, n, x, pool);
    clock.Mark(PassStage::kExperts);
    return experts;
  }
  const int64_t I = intermediate_;
  const ops::MatMulOutput gate_up[] = {{&w.gate_proj, nullptr, gate_.data()}, {&w.up_proj, nullptr, up_.data()}};
  ops::MatMulShared(x, n, gate_up, pool);
  clock.Mark(PassStage::kGateUp);
  pool.ParallelFor(n, [&](int64_t r) { ops::SiluMul(gate_.data() + r * I, up_.data() + r * I, I, gate_.data() + r * I); });
  clock.Mark(PassStage::kOther);
  ops::MatMul(gate_.data(), n, w.down_proj, nullptr, x, pool);
  clock.Mark(PassStage::kDown);
  return 0;
}

}  // namespace dflash
