#include "model/qwen35.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "model/decoder_layer.h"
#include "model/pass_ends.h"
#include "ops/ops.h"

namespace dflash {

namespace {

// transformers' Qwen3_5RMSNorm multiplies by (1 + weight), computed in f32: fold it in once.
std::vector<float> OnePlus(std::vector<float> w) {
  for (float& x : w) x += 1.0f;
  return w;
}

void Copy(const std::vector<float>& from, std::vector<float>& to) { std::copy(from.begin(), from.end(), to.begin()); }

}  // namespace

size_t HybridState::bytes() const {
  size_t floats = log_qkv.size() + log_decay.size() + log_beta.size();
  for (int i = 0; i < 2; ++i) floats += conv[i].size() + rec[i].size();
  for (const StateCheckpoint& c : checkpoints) floats += c.conv.size() + c.rec.size();
  return kv.bytes() + floats * sizeof(float);
}

const StateCheckpoint* HybridState::CheckpointWithin(int length) const {
  const StateCheckpoint* best = nullptr;
  for (const StateCheckpoint& c : checkpoints) {
    if (c.length >= 0 && c.length <= length && (!best || c.length > best->length)) best = &c;
  }
  return best;
}

int HybridState::RestorablePrefix(int length) const {
  if (length >= kv.filled) return kv.filled;
  if (length >= forward_start) return length;  // a prefix of the last Forward's rows: replayed
  const StateCheckpoint* c = CheckpointWithin(length);
  return c ? c->length : 0;
}

namespace {

void SaveFloats(const std::vector<float>& v, const ByteSink& out) {
  const int64_t n = static_cast<int64_t>(v.size());
  out(&n, sizeof(n));
  out(v.data(), v.size() * sizeof(float));
}

void LoadFloats(std::vector<float>& v, const ByteSource& in, const char* what) {
  int64_t n = 0;
  in(&n, sizeof(n));
  if (n != static_cast<int64_t>(v.size())) Fail("hybrid state: saved ", what, " of ", n, " floats, this model's ", v.size());
  in(v.data(), v.size() * sizeof(float));
}

}  // namespace

void HybridState::Save(const ByteSink& out) const {
  kv.Save(out);
  SaveFloats(conv[current], out);
  SaveFloats(rec[current], out);
  std::vector<const StateCheckpoint*> kept;
  for (const StateCheckpoint& c : checkpoints) {
    if (c.length >= 0) kept.push_back(&c);
  }
  // Longest first, so that a state with a smaller ring loads the ones most likely to be used.
  std::sort(kept.begin(), kept.end(), [](const StateCheckpoint* a, const StateCheckpoint* b) { return a->length > b->length; });
  const int32_t count = static_cast<int32_t>(kept.size());
  out(&count, sizeof(count));
  for (const StateCheckpoint* c : kept) {
    const int32_t length = c->length;
    out(&length, sizeof(length));
    SaveFloats(c->conv, out);
    SaveFloats(c->rec, out);
  }
}

void HybridState::Load(const ByteSource& in) {
  // Empty (zero state, no checkpoint) until every byte is in: the new state goes to the other
  // copy and becomes current at the end.
  kv.filled = forward_start = forward_rows = 0;
  for (StateCheckpoint& c : checkpoints) c.length = -1;
  std::fill(conv[current].begin(), conv[current].end(), 0.0f);
  std::fill(rec[current].begin(), rec[current].end(), 0.0f);
  const int next = 1 - current;
  kv.Load(in);
  const int length = kv.filled;
  kv.filled = 0;
  LoadFloats(conv[next], in, "conv state");
  LoadFloats(rec[next], in, "recurrent state");
  int32_t count = 0;
  in(&count, sizeof(count));
  if (count < 0 || count > length + 1) Fail("hybrid state: ", count, " checkpoints in a state of ", length, " positions");
  std::vector<int32_t> lengths(count);
  StateCheckpoint beyond_ring{-1, std::vector<float>(conv[next].size()), std::vector<float>(rec[next].size())};
  for (int32_t i = 0; i < count; ++i) {
    in(&lengths[i], sizeof(int32_t));
    if (lengths[i] < 0 || lengths[i] > length) Fail("hybrid state: checkpoint at ", lengths[i], " of ", length, " positions");
    StateCheckpoint& c = i < static_cast<int32_t>(checkpoints.size()) ? checkpoints[i] : beyond_ring;
    LoadFloats(c.conv, in, "checkpoint conv state");
    LoadFloats(c.rec, in, "checkpoint recurrent state");
  }
  current = next;
  kv.filled = forward_start = length;
  for (int32_t i = 0; i < count && i < static_cast<int32_t>(checkpoints.size()); ++i) checkpoints[i].length = lengths[i];
}

Qwen35Model::Qwen35Model(const TargetConfig& config, const TensorStore& store, const TargetOptions& options,
                         ThreadPool& pool)
    : cfg_(config.decoder),
      options_(options),
      pool_(pool),
      rope_(cfg_.rope, cfg_.head_dim, options.kv_capacity),
      q_dim_(cfg_.num_heads * cfg_.head_dim),
      kv_dim_(cfg_.num_kv_heads * cfg_.head_dim),
      feature_width_(static_cast<int>(options.capture_layers.size()) * cfg_.hidden_size),
      full_layers_(static_cast<int>(std::count(cfg_.layer_linear.begin(), cfg_.layer_linear.end(), false))),
      linear_layers_(cfg_.num_layers - full_layers_),
      kv_layout_(full_layers_, cfg_.num_kv_heads, cfg_.head_dim, options.kv_capacity, options.kv_type),
      deltanet_(config, std::max(options.max_rows, 1), pool),
      mlp_(cfg_, config.moe, std::max(options.max_rows, 1)) {
  const int64_t H = cfg_.hidden_size, V = cfg_.vocab_size;
  if (options_.max_rows < 1) Fail("target: max_rows must be at least 1");
  if (options_.kv_capacity < 1) Fail("target: kv capacity must be at least 1");
  if (options_.kv_type != DType::kF32 && options_.kv_type != DType::kF16 && options_.kv_type != DType::kBF16)
    Fail("target: KV cache type ", DTypeName(options_.kv_type), " is not f32, f16 or bf16");
  if (options_.kv_type == DType::kBF16 && cfg_.head_dim % 2 != 0)
    Fail(store.origin(), ": a bf16 KV cache pairs head dims, head_dim ", cfg_.head_dim, " is odd (use --kv-type f16)");
  if (options_.checkpoints < 0 || options_.checkpoint_interval < 0) {
    Fail("target: state checkpoints ", options_.checkpoints, " every ", options_.checkpoint_interval,
         " positions: neither may be negative");
  }
  if (cfg_.attention_bias) Fail(store.origin(), ": attention_bias is not supported for Qwen3.5 hybrids");
  for (int id : options_.capture_layers) {
    if (id < 0 || id >= cfg_.num_layers) Fail(store.origin(), ": capture layer ", id, " out of range");
  }
  // Qwen3_5ForConditionalGeneration nests the text model under model.language_model.
  const std::string model = store.Find("model.language_model.embed_tokens.weight") ? "model.language_model." : "model.";
  embed_ = AsWeight(store.Require(model + "embed_tokens.weight", {V, H}));
  if (cfg_.tie_word_embeddings) {
    lm_head_ = store.Find("lm_head.weight") ? AsWeight(store.Require("lm_head.weight", {V, H})) : embed_;
  } else {
    lm_head_ = AsWeight(store.Require("lm_head.weight", {V, H}));
  }
  const auto vector = [&](const std::string& name, int64_t n) { return ToF32Vector(store.Require(name, {n})); };
  const auto matrix = [&](const std::string& name, int64_t rows, int64_t cols) {
    return AsWeight(store.Require(name, {rows, cols}));
  };
  int full = 0, linear = 0;
  for (int l = 0; l < cfg_.num_layers; ++l) {
    const std::string p = model + "layers." + std::to_string(l);
    Layer w;
    if (cfg_.layer_linear[l]) {
      w.slot = linear++;
      w.linear = LoadGatedDeltaNet(store, p, config);
    } else {
      w.slot = full++;
      w.q_proj = matrix(p + ".self_attn.q_proj.weight", 2 * q_dim_, H);
      w.k_proj = matrix(p + ".self_attn.k_proj.weight", kv_dim_, H);
      w.v_proj = matrix(p + ".self_attn.v_proj.weight", kv_dim_, H);
      w.o_proj = matrix(p + ".self_attn.o_proj.weight", H, q_dim_);
      w.q_norm = OnePlus(vector(p + ".self_attn.q_norm.weight", cfg_.head_dim));
      w.k_norm = OnePlus(vector(p + ".self_attn.k_norm.weight", cfg_.head_dim));
    }
    w.mlp = LoadFeedForward(store, p + ".mlp", cfg_, config.moe.num_experts > 0 ? &config.moe : nullptr);
    CountExperts(w.mlp, config.moe, expert_shape_);
    w.input_norm = OnePlus(vector(p + ".input_layernorm.weight", H));
    w.post_attention_norm = OnePlus(vector(p + ".post_attention_layernorm.weight", H));
    layers_.push_back(std::move(w));
  }
  final_norm_ = OnePlus(vector(model + "norm.weight", H));

  const size_t R = options_.max_rows;
  if (options_.own_cache) {
    own_state_.reset(static_cast<HybridState*>(NewState().release()));
    state_ = own_state_.get();
  }
  x_.resize(R * H);
  xn_.resize(R * H);
  qg_.resize(R * 2 * q_dim_);
  q_.resize(R * q_dim_);
  gate_attn_.resize(R * q_dim_);
  k_new_.resize(R * kv_dim_);
  v_new_.resize(R * kv_dim_);
  attn_.resize(R * q_dim_);
  logits_.resize(R * V);
  features_.resize(R * std::max(feature_width_, 1));
  key_begin_.resize(R);
  key_end_.resize(R);
}

std::unique_ptr<TargetState> Qwen35Model::NewState() const {
  auto s = std::make_unique<HybridState>();
  s->kv = kv_layout_.NewCache();
  const size_t L = linear_layers_, R = options_.max_rows;
  for (int i = 0; i < 2; ++i) {
    s->conv[i].assign(L * deltanet_.conv_floats(), 0.0f);
    s->rec[i].assign(L * deltanet_.recurrent_floats(), 0.0f);
  }
  s->checkpoints.resize(options_.checkpoints);
  for (StateCheckpoint& c : s->checkpoints) {
    c.conv.assign(s->conv[0].size(), 0.0f);
    c.rec.assign(s->rec[0].size(), 0.0f);
  }
  s->log_qkv.assign(L * R * deltanet_.conv_dim(), 0.0f);
  s->log_decay.assign(L * R * deltanet_.value_heads(), 0.0f);
  s->log_beta.assign(s->log_decay.size(), 0.0f);
  return s;
}

size_t Qwen35Model::checkpoint_bytes() const {
  return linear_layers_ * (deltanet_.conv_floats() + deltanet_.recurrent_floats()) * sizeof(float);
}

size_t Qwen35Model::state_bytes() const {
  const size_t L = linear_layers_, R = options_.max_rows;
  const size_t log = R * (deltanet_.conv_dim() + 2 * static_cast<size_t>(deltanet_.value_heads()));
  const size_t copies = 2 + static_cast<size_t>(options_.checkpoints);  // before and after a Forward, the checkpoints
  return kv_layout_.bytes() + L * log * sizeof(float) + copies * checkpoint_bytes();
}

void Qwen35Model::Bind(TargetState* state) {
  HybridState* next = state ? dynamic_cast<HybridState*>(state) : own_state_.get();
  if (!next || !kv_layout_.Made(next->kv) ||
      next->rec[0].size() != static_cast<size_t>(linear_layers_) * deltanet_.recurrent_floats() ||
      next->log_qkv.size() != static_cast<size_t>(linear_layers_) * options_.max_rows * deltanet_.conv_dim() ||
      next->checkpoints.size() != static_cast<size_t>(options_.checkpoints)) {
    Fail("target: bound state was not made by this model");
  }
  state_ = next;
}

// Linear layer `slot`'s buffers: a Forward reads the copy before it and writes the other; a
// replay reads the same copy before and rewrites the other.
GatedDeltaNetState Qwen35Model::LinearSlot(HybridState& s, int slot) const {
  const int cur = s.current, prev = 1 - cur;
  const size_t cf = deltanet_.conv_floats(), rf = deltanet_.recurrent_floats();
  const size_t R = options_.max_rows;
  return GatedDeltaNetState{s.conv[prev].data() + slot * cf,
                            s.rec[prev].data() + slot * rf,
                            s.conv[cur].data() + slot * cf,
                            s.rec[cur].data() + slot * rf,
                            s.log_qkv.data() + slot * R * deltanet_.conv_dim(),
                            s.log_decay.data() + slot * R * deltanet_.value_heads(),
                            s.log_beta.data() + slot * R * deltanet_.value_heads()};
}

void Qwen35Model::Truncate(int length) {
  HybridState& s = *state_;
  if (length < 0 || length > s.kv.filled) Fail("target: cannot truncate a state of ", s.kv.filled, " positions to ", length);
  if (length == s.kv.filled) return;
  for (StateCheckpoint& c : s.checkpoints) {
    if (c.length > length) c.length = -1;  // its tokens may change from here
  }
  if (length >= s.forward_start) {
    const int rows = length - s.forward_start;
    for (int l = 0; l < cfg_.num_layers; ++l) {
      if (!cfg_.layer_linear[l]) continue;
      GatedDeltaNetState st = LinearSlot(s, layers_[l].slot);
      deltanet_.Replay(layers_[l].linear, rows, st);
    }
    s.forward_rows = rows;
  } else {
    const StateCheckpoint* c = s.CheckpointWithin(length);
    if (c && c->length == length) {
      Copy(c->conv, s.conv[s.current]);
      Copy(c->rec, s.rec[s.current]);
    } else if (length == 0) {
      std::fill(s.conv[s.current].begin(), s.conv[s.current].end(), 0.0f);
      std::fill(s.rec[s.current].begin(), s.rec[s.current].end(), 0.0f);
    } else {
      Fail("target: a recurrent state of ", s.kv.filled, " positions cannot be restored to ", length,
           " (restorable: ", s.RestorablePrefix(length), ")");
    }
    s.forward_start = length;
    s.forward_rows = 0;
  }
  s.kv.filled = length;
}

void Qwen35Model::SaveCheckpoint(HybridState& s) const {
  if (s.checkpoints.empty()) return;
  StateCheckpoint* slot = &s.checkpoints[0];
  for (StateCheckpoint& c : s.checkpoints) {
    if (c.length == s.kv.filled) return;  // already kept
    if (c.length < slot->length) slot = &c;
  }
  Copy(s.conv[s.current], slot->conv);
  Copy(s.rec[s.current], slot->rec);
  slot->length = s.kv.filled;
}

void Qwen35Model::Checkpoint() { SaveCheckpoint(*state_); }

void Qwen35Model::FillSyntheticKv(int length) {
  if (!state_) Fail("target: FillSyntheticKv without a state bound");
  if (length < 0 || length > options_.kv_capacity) {
    Fail("target: synthetic KV length ", length, " is outside [0, ", options_.kv_capacity, "]");
  }
  // The recurrent state's size does not grow with the context: only the KV needs filling.
  kv_layout_.FillSynthetic(state_->kv, length);
  state_->forward_start = length;
  state_->forward_rows = 0;
  for (StateCheckpoint& c : state_->checkpoints) c.length = -1;
}

std::span<const float> Qwen35Model::ConvState(int j) const {
  const size_t n = deltanet_.conv_floats();
  return {state_->conv[state_->current].data() + j * n, n};
}

std::span<const float> Qwen35Model::RecurrentState(int j) const {
  const size_t n = deltanet_.recurrent_floats();
  return {state_->rec[state_->current].data() + j * n, n};
}

void Qwen35Model::Attention(const Layer& w, int n, StageClock& clock) {
  HybridState& s = *state_;
  const int pos0 = s.kv.filled, hd = cfg_.head_dim;
  uint8_t* k_layer = kv_layout_.Keys(s.kv, w.slot);
  uint8_t* v_layer = kv_layout_.Values(s.kv, w.slot);
  const ops::MatMulOutput qkv[] = {{&w.q_proj, nullptr, qg_.data()},
                                    {&w.k_proj, nullptr, k_new_.data()},
                                    {&w.v_proj, nullptr, v_new_.data()}};
  ops::MatMulShared(xn_.data(), n, qkv, pool_);
  clock.Mark(PassStage::kQkv);
  const float eps = static_cast<float>(cfg_.rms_norm_eps);
  pool_.ParallelFor(n, [&](int64_t r) {
    const int pos = pos0 + static_cast<int>(r);
    float* q = q_.data() + r * q_dim_;
    float* gate = gate_attn_.data() + r * q_dim_;
    float* k = k_new_.data() + r * kv_dim_;
    const float* qg = qg_.data() + r * 2 * q_dim_;
    for (int h = 0; h < cfg_.num_heads; ++h) {
      std::memcpy(q + h * hd, qg + 2 * h * hd, hd * sizeof(float));
      std::memcpy(gate + h * hd, qg + (2 * h + 1) * hd, hd * sizeof(float));
    }
    ops::RmsNorm(q, cfg_.num_heads, hd, w.q_norm.data(), eps, q);
    ops::RmsNorm(k, cfg_.num_kv_heads, hd, w.k_norm.data(), eps, k);
    rope_.Apply(q, cfg_.num_heads, pos);
    rope_.Apply(k, cfg_.num_kv_heads, pos);
    key_begin_[r] = 0;
    key_end_[r] = pos + 1;
    kv_layout_.Store(k, 1, pos, /*keys=*/true, k_layer);
    kv_layout_.Store(v_new_.data() + r * kv_dim_, 1, pos, /*keys=*/false, v_layer);
  });
  const ops::AttentionShape shape{cfg_.num_heads, cfg_.num_kv_heads, hd, 1.0f / std::sqrt(static_cast<float>(hd))};
  clock.Mark(PassStage::kOther);
  ops::Attention(q_.data(), n, q_dim_, shape, kv_layout_.View(s.kv, w.slot), key_begin_.data(), key_end_.data(),
                 attn_.data(), q_dim_, pool_);
  clock.Mark(PassStage::kAttention);
  // The output gate: attn * sigmoid(gate).
  pool_.ParallelFor(n, [&](int64_t r) {
    float* a = attn_.data() + r * q_dim_;
    const float* g = gate_attn_.data() + r * q_dim_;
    for (int i = 0; i < q_dim_; ++i) a[i] *= 1.0f / (1.0f + std::exp(-g[i]));
  });
  ops::MatMul(attn_.data(), n, w.o_proj, nullptr, xn_.data(), pool_);
  clock.Mark(PassStage::kOProj);
}

void Qwen35Model::Forward(std::span<const int32_t> tokens, bool all_logits) {
  const int n = static_cast<int>(tokens.size());
  const int64_t H = cfg_.hidden_size;
  if (n < 1 || n > options_.max_rows) Fail("target: Forward of ", n, " rows (max ", options_.max_rows, ")");
  if (!state_) Fail("target: Forward without a state bound");
  HybridState& s = *state_;
  if (s.kv.filled + n > options_.kv_capacity) {
    Fail("context full: ", s.kv.filled + n, " positions needed, KV cache holds ", options_.kv_capacity);
  }
  // Every position before a Forward is committed (the loop truncates a verify's rejected rows
  // before the next one), so the state here may be kept.
  if (options_.checkpoint_interval > 0 && s.kv.filled > 0) {
    const StateCheckpoint* last = s.CheckpointWithin(s.kv.filled);
    if (s.kv.filled - (last ? last->length : 0) >= options_.checkpoint_interval) SaveCheckpoint(s);
  }
  StageClock clock(profile_);
  EmbedTokens(embed_, tokens, cfg_.vocab_size, H, x_.data());
  const FeatureCapture capture{options_.capture_layers, H, features_.data()};
  // The new state goes to the other copy; this one stays as the start of a replay.
  s.current = 1 - s.current;
  s.forward_start = s.kv.filled;
  s.forward_rows = n;
  const float eps = static_cast<float>(cfg_.rms_norm_eps);
  const ResidualStream stream{x_.data(), xn_.data(), n, H, eps, pool_};
  const auto mixer = [&](int l) {
    const Layer& w = layers_[l];
    if (cfg_.layer_linear[l]) {
      GatedDeltaNetState st = LinearSlot(s, w.slot);
      deltanet_.Forward(w.linear, xn_.data(), n, st, xn_.data(), clock);
    } else {
      Attention(w, n, clock);
    }
  };
  const auto mlp = [&](int l) { experts_read_ += mlp_.Forward(layers_[l].mlp, xn_.data(), n, pool_, clock); };
  experts_read_ = 0;
  RunLayers(std::span<const Layer>(layers_), stream, &capture, clock, mixer, mlp);
  s.kv.filled += n;
  if (profile_) profile_->experts_read += experts_read_;
  FinishPass(x_.data(), xn_.data(), n, all_logits, final_norm_, eps, cfg_.num_layers, capture, lm_head_, logits_.data(),
             pool_, clock);
}

int64_t Qwen35Model::DecodeBytes(int ctx) const {
  const auto bytes = [](const WeightRef& w) { return w.rows * static_cast<int64_t>(w.row_bytes); };
  int64_t total = bytes(lm_head_) + static_cast<int64_t>(embed_.row_bytes);
  for (int l = 0; l < cfg_.num_layers; ++l) {
    const Layer& w = layers_[l];
    total += FeedForwardDecodeBytes(w.mlp, expert_shape_.top_k);
    if (cfg_.layer_linear[l]) {
      const GatedDeltaNetWeights& g = w.linear;
      for (const WeightRef* m : {&g.in_proj_qkv, &g.in_proj_z, &g.in_proj_b, &g.in_proj_a, &g.out_proj}) {
        total += bytes(*m);
      }
      // The recurrent state is read and written once per step, whatever the context.
      total += 2 * static_cast<int64_t>(deltanet_.recurrent_floats() * sizeof(float));
    } else {
      for (const WeightRef* m : {&w.q_proj, &w.k_proj, &w.v_proj, &w.o_proj}) total += bytes(*m);
      total += kv_layout_.ReadBytes(ctx + 1);
    }
  }
  return total;
}

}  // namespace dflash
