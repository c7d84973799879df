#include "draft/dflash_draft.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "ops/ops.h"

namespace dflash {

namespace {

// Rows of the rotary table: the context plus one block. Checked before the table is built,
// since options may come from anywhere.
int RopePositions(const TargetModel& target, const DraftOptions& options) {
  if (options.max_block < 1 || options.max_block > kMaxBlockSize) {
    Fail("draft: max_block ", options.max_block, " outside [1, ", kMaxBlockSize, "]");
  }
  return target.kv_capacity() + options.max_block;
}

}  // namespace

DFlashDraft::DFlashDraft(const DraftConfig& config, const TensorStore& store,
                         const TargetModel& target, const DraftOptions& options, ThreadPool& pool)
    : cfg_(config),
      options_(options),
      pool_(pool),
      target_(target),
      rope_(config.decoder.rope, config.decoder.head_dim, RopePositions(target, options)) {
  const DecoderConfig& d = cfg_.decoder;
  const int64_t H = d.hidden_size;
  vocab_ = target.config().vocab_size;
  q_dim_ = d.num_heads * d.head_dim;
  kv_dim_ = d.num_kv_heads * d.head_dim;
  feature_width_ = static_cast<int>(cfg_.target_layer_ids.size()) * d.hidden_size;
  if (static_cast<int>(target.capture_layers().size()) * target.config().hidden_size != feature_width_) {
    Fail(store.origin(), ": the target captures ", target.capture_layers().size(),
         " layers but the draft expects ", cfg_.target_layer_ids.size());
  }
  fc_ = AsWeight(store.Require("fc.weight", {H, feature_width_}));
  hidden_norm_ = ToF32Vector(store.Require("hidden_norm.weight", {H}));
  final_norm_ = ToF32Vector(store.Require("norm.weight", {H}));
  for (int l = 0; l < d.num_layers; ++l) {
    layers_.push_back(LoadDecoderLayer(store, "layers." + std::to_string(l), d));
  }
  if (cfg_.dflash2()) {
    convs_.emplace(cfg_, store, options.max_block);
    selector_.emplace(cfg_, store, vocab_, std::max(options.max_block - 1, 1));
  }
  if (options_.window > 0) {
    options_.context_capacity = options_.sink + options_.window + options_.window / 2 + options_.max_append;
  }
  cache_rows_ = options_.context_capacity + options_.max_block;
  ops::CheckKvType(options_.kv_type, "draft context");
  if (options_.kv_type == DType::kBF16 && d.head_dim % 2 != 0)
    Fail(store.origin(), ": a bf16 draft context pairs head dims, head_dim ", d.head_dim, " is odd");
  head_rows_ = (cache_rows_ + ops::kKvTile - 1) / ops::kKvTile * ops::kKvTile;
  layer_bytes_ = RowBytes(options_.kv_type, head_rows_ * kv_dim_);
  if (options_.own_context) own_ctx_ = NewContext();
  const int B = options_.max_block;
  const int R = std::max(B, options_.max_append);
  ctx_.resize(static_cast<size_t>(options_.max_append) * H);
  x_.resize(static_cast<size_t>(B) * H);
  xn_.resize(static_cast<size_t>(R) * std::max<int64_t>(H, q_dim_));
  q_.resize(static_cast<size_t>(B) * q_dim_);
  attn_.resize(static_cast<size_t>(B) * q_dim_);
  k_new_.resize(static_cast<size_t>(R) * kv_dim_);
  v_new_.resize(static_cast<size_t>(R) * kv_dim_);
  gate_.resize(static_cast<size_t>(B) * d.intermediate_size);
  up_.resize(static_cast<size_t>(B) * d.intermediate_size);
  logits_.resize(static_cast<size_t>(std::max(B - 1, 1)) * vocab_);
  key_begin_.resize(B);
  key_end_.resize(B);
}

DraftContext DFlashDraft::NewContext() const {
  const size_t n = static_cast<size_t>(cfg_.decoder.num_layers) * layer_bytes_;
  DraftContext c;
  c.type = options_.kv_type;
  c.k.assign(n, 0);
  c.v.assign(n, 0);
  c.pos.assign(cache_rows_, 0);
  const DecoderConfig& d = cfg_.decoder;
  c.shape = {options_.kv_type, d.num_layers * d.num_kv_heads, d.head_dim, RowBytes(options_.kv_type, head_rows_ * d.head_dim)};
  return c;
}

void DraftContext::Save(const ByteSink& out) const {
  shape.SaveShape(out);
  const int32_t n = length;
  out(&n, sizeof(n));
  out(pos.data(), static_cast<size_t>(length) * sizeof(int32_t));
  shape.Save(k.data(), length, out);
  shape.Save(v.data(), length, out);
}

void DraftContext::Load(const ByteSource& in) {
  length = 0;  // empty until every byte is in
  shape.CheckSaved(in, "draft context");
  int32_t n = 0;
  in(&n, sizeof(n));
  if (n < 0 || n > static_cast<int32_t>(pos.size())) Fail("draft context: saved ", n, " rows, capacity ", pos.size());
  in(pos.data(), static_cast<size_t>(n) * sizeof(int32_t));
  for (int32_t r = 0; r < n; ++r) {
    if (pos[r] < 0 || (r > 0 && pos[r] <= pos[r - 1])) Fail("draft context: saved row ", r, " at position ", pos[r], " is out of order");
  }
  shape.Load(k.data(), n, in);
  shape.Load(v.data(), n, in);
  length = n;
}

void DFlashDraft::Bind(DraftContext* context) {
  DraftContext* next = context ? context : &own_ctx_;
  if (next->type != options_.kv_type || next->pos.size() != static_cast<size_t>(cache_rows_) ||
      next->k.size() != static_cast<size_t>(cfg_.decoder.num_layers) * layer_bytes_)
    Fail("draft: bound context was not made by this draft");
  bound_ = next;
}

size_t DFlashDraft::cache_bytes() const {
  return static_cast<size_t>(cfg_.decoder.num_layers) * layer_bytes_ * 2 + cache_rows_ * sizeof(int32_t);
}

ops::KvView DFlashDraft::View(int layer) const {
  const int hd = cfg_.decoder.head_dim;
  return {Cache(bound_->k, layer), Cache(bound_->v, layer), hd, options_.kv_type, head_rows_ * hd, true};
}

void DFlashDraft::Store(const float* rows, int n, int row0, bool keys, uint8_t* layer_cache) const {
  const int hd = cfg_.decoder.head_dim;
  for (int h = 0; h < cfg_.decoder.num_kv_heads; ++h) {
    uint8_t* head = layer_cache + RowBytes(options_.kv_type, h * head_rows_ * hd);
    for (int r = 0; r < n; ++r) {
      const float* x = rows + static_cast<size_t>(r) * kv_dim_ + static_cast<size_t>(h) * hd;
      if (keys) {
        ops::StoreKeyTiled(x, hd, options_.kv_type, row0 + r, head);
      } else {
        ops::StoreValueTiled(x, hd, options_.kv_type, row0 + r, head);
      }
    }
  }
}

void DFlashDraft::MoveRows(int from, int to, int n, bool keys, uint8_t* layer_cache) const {
  const DType type = options_.kv_type;
  const int hd = cfg_.decoder.head_dim;
  const size_t elem = RowBytes(type, 1);
  const auto offset = [&](int64_t row, int64_t i) {
    return static_cast<size_t>(keys ? ops::TiledKeyOffset(row, i, hd, type) : ops::TiledValueOffset(row, i, hd, type));
  };
  // Rows ascending: row to + r is written only after row from + r' = to + r was read (to < from).
  for (int h = 0; h < cfg_.decoder.num_kv_heads; ++h) {
    uint8_t* head = layer_cache + RowBytes(type, h * head_rows_ * hd);
    for (int r = 0; r < n; ++r) {
      for (int i = 0; i < hd; ++i) std::memcpy(head + offset(to + r, i) * elem, head + offset(from + r, i) * elem, elem);
    }
  }
}

void DFlashDraft::AppendContext(const float* features, int n, int pos) {
  const DecoderConfig& d = cfg_.decoder;
  const int64_t H = d.hidden_size;
  const float eps = static_cast<float>(d.rms_norm_eps);
  if (bound_->pos.empty()) Fail("draft: AppendContext without a context bound");
  if (n < 1 || n > options_.max_append) Fail("draft: AppendContext of ", n, " rows (max ", options_.max_append, ")");
  if (options_.window > 0 && bound_->length + n > options_.sink + options_.window + options_.window / 2) Compact();
  if (bound_->length + n > options_.context_capacity) {
    Fail("draft context full: ", bound_->length + n, " rows, capacity ", options_.context_capacity);
  }
  ops::MatMul(features, n, fc_, nullptr, ctx_.data(), pool_);
  ops::RmsNorm(ctx_.data(), n, H, hidden_norm_.data(), eps, ctx_.data());
  for (int l = 0; l < d.num_layers; ++l) {
    const DecoderLayerWeights& w = layers_[l];
    float* k_rows = k_new_.data();
    const ops::MatMulOutput kv[] = {{&w.k_proj, BiasOrNull(w.k_bias), k_rows},
                                    {&w.v_proj, BiasOrNull(w.v_bias), v_new_.data()}};
    ops::MatMulShared(ctx_.data(), n, kv, pool_);
    ops::RmsNorm(k_rows, static_cast<int64_t>(n) * d.num_kv_heads, d.head_dim, w.k_norm.data(), eps, k_rows);
    for (int r = 0; r < n; ++r) rope_.Apply(k_rows + static_cast<size_t>(r) * kv_dim_, d.num_kv_heads, pos + r);
    Store(k_rows, n, bound_->length, true, Cache(bound_->k, l));
    Store(v_new_.data(), n, bound_->length, false, Cache(bound_->v, l));
  }
  for (int r = 0; r < n; ++r) bound_->pos[bound_->length + r] = pos + r;
  bound_->length += n;
}

void DFlashDraft::Compact() {
  // Keep rows [0, sink) and the last `window` rows; positions stay absolute (RoPE is baked
  // into the cached keys), and cached rows stay sorted by position.
  const int keep_from = bound_->length - options_.window;
  const int dst = options_.sink;
  if (keep_from <= dst) return;
  for (int l = 0; l < cfg_.decoder.num_layers; ++l) {
    MoveRows(keep_from, dst, options_.window, true, Cache(bound_->k, l));
    MoveRows(keep_from, dst, options_.window, false, Cache(bound_->v, l));
  }
  std::memmove(bound_->pos.data() + dst, bound_->pos.data() + keep_from, options_.window * sizeof(int32_t));
  bound_->length = dst + options_.window;
}

void DFlashDraft::TruncateContext(int pos) {
  if (options_.window > 0 && pos > 0) Fail("draft: TruncateContext(", pos, ") needs an unbounded draft context");
  bound_->length = std::min(bound_->length, std::max(pos, 0));
}

void DFlashDraft::LayerAttention(int layer, int B, int pos, StageClock& clock) {
  const DecoderConfig& d = cfg_.decoder;
  const DecoderLayerWeights& w = layers_[layer];
  // The block's own rows sit after the context for this pass only.
  ProjectQkv(w, d, rope_, xn_.data(), B, pos, q_.data(), k_new_.data(), v_new_.data(), pool_, clock, [&](int64_t j) {
    Store(k_new_.data() + j * kv_dim_, 1, bound_->length + static_cast<int>(j), true, Cache(bound_->k, layer));
    Store(v_new_.data() + j * kv_dim_, 1, bound_->length + static_cast<int>(j), false, Cache(bound_->v, layer));
  });
  const int window = d.layer_window[layer];
  const bool causal = cfg_.layer_causal[layer];
  const int total = bound_->length + B;
  for (int j = 0; j < B; ++j) {
    const int q_pos = pos + j;
    int begin = 0, end = causal ? bound_->length + j + 1 : total;
    if (window > 0) {
      // Cached rows are sorted by position: find the first with q_pos - k_pos < window.
      begin = static_cast<int>(std::upper_bound(bound_->pos.begin(), bound_->pos.begin() + bound_->length, q_pos - window) -
                               bound_->pos.begin());
      if (begin == bound_->length) begin = bound_->length + std::max(0, j - window + 1);
      if (!causal) end = std::min(total, bound_->length + j + window);
    }
    key_begin_[j] = begin;
    key_end_[j] = end;
  }
  AttendAndProject(w, d, q_.data(), B, View(layer), key_begin_.data(), key_end_.data(), attn_.data(), xn_.data(), pool_,
                   clock);
}

void DFlashDraft::Propose(int32_t anchor, int pos, int B, int proposals) {
  const DecoderConfig& d = cfg_.decoder;
  const int64_t H = d.hidden_size, I = d.intermediate_size;
  const float eps = static_cast<float>(d.rms_norm_eps);
  if (bound_->pos.empty()) Fail("draft: Propose without a context bound");
  if (B < 2 || B > options_.max_block) Fail("draft: block size ", B, " outside [2, ", options_.max_block, "]");
  if (proposals < 1 || proposals > B - 1) Fail("draft: ", proposals, " proposals outside [1, ", B - 1, "]");
  if (pos + B > rope_.max_positions()) Fail("draft: position ", pos + B, " beyond the context");
  const float scale = static_cast<float>(cfg_.input_embedding_scale);
  for (int j = 0; j < B; ++j) {
    ops::DequantizeRow(target_.embedding(), j == 0 ? anchor : cfg_.mask_token_id, x_.data() + j * H);
    if (scale != 1.0f) {
      for (int64_t i = 0; i < H; ++i) x_[j * H + i] *= scale;
    }
  }
  StageClock clock(nullptr);  // a draft pass is timed whole, by the loop
  const ResidualStream stream{x_.data(), xn_.data(), B, H, eps, pool_};
  RunLayers(std::span<const DecoderLayerWeights>(layers_), stream, nullptr, clock,
            [&](int l) {
              if (convs_) convs_->Prepare(l, DynamicConvs::kAttention, xn_.data(), B, pool_);
              LayerAttention(l, B, pos, clock);
              if (convs_) convs_->Finish(l, DynamicConvs::kAttention, xn_.data(), B, pool_);
            },
            [&](int l) {
              const DecoderLayerWeights& w = layers_[l];
              if (convs_) convs_->Prepare(l, DynamicConvs::kMlp, xn_.data(), B, pool_);
              const ops::MatMulOutput gate_up[] = {{&w.mlp.gate_proj, nullptr, gate_.data()}, {&w.mlp.up_proj, nullptr, up_.data()}};
              ops::MatMulShared(xn_.data(), B, gate_up, pool_);
              pool_.ParallelFor(B, [&](int64_t j) {
                ops::SiluMul(gate_.data() + j * I, up_.data() + j * I, I, gate_.data() + j * I);
              });
              ops::MatMul(gate_.data(), B, w.mlp.down_proj, nullptr, xn_.data(), pool_);
              if (convs_) convs_->Finish(l, DynamicConvs::kMlp, xn_.data(), B, pool_);
            });
  ops::RmsNorm(x_.data() + H, proposals, H, final_norm_.data(), eps, xn_.data());
  ops::MatMul(xn_.data(), proposals, target_.lm_head(), nullptr, logits_.data(), pool_);
  const float mult = static_cast<float>(cfg_.output_multiplier);
  const float cap = static_cast<float>(cfg_.final_logit_softcapping);
  if (mult != 1.0f || cap > 0) {
    for (size_t i = 0; i < static_cast<size_t>(proposals) * vocab_; ++i) {
      float v = logits_[i] * mult;
      if (cap > 0) v = std::tanh(v / cap) * cap;
      logits_[i] = v;
    }
  }
  if (selector_) selector_->Prepare(xn_.data(), logits_.data(), proposals, pool_);
}

Drafter::Candidates DFlashDraft::SelectAfter(int j, int32_t previous) {
  if (!selector_) return Drafter::SelectAfter(j, previous);
  return {selector_->Candidates(j), selector_->Score(j, previous)};
}

}  // namespace dflash
