#include "model/gated_deltanet.h"

#include <cmath>
#include <cstring>

#include "ops/delta_rule.h"
#include "ops/ops.h"

namespace dflash {

namespace {

float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// torch.nn.functional.softplus: log(1 + exp(x)), x itself above the threshold 20.
float Softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// x / sqrt(sum(x^2) + 1e-6) * scale, as transformers' l2norm (eps inside the root).
void L2Normalize(float* x, int n, float scale) {
  float ss = 0.0f;
  for (int i = 0; i < n; ++i) ss += x[i] * x[i];
  const float inv = 1.0f / std::sqrt(ss + 1e-6f) * scale;
  for (int i = 0; i < n; ++i) x[i] *= inv;
}

}  // namespace

GatedDeltaNetWeights LoadGatedDeltaNet(const TensorStore& store, const std::string& prefix, const TargetConfig& c) {
  const LinearAttentionConfig& l = c.linear;
  const int64_t H = c.decoder.hidden_size;
  const int64_t key_dim = static_cast<int64_t>(l.num_key_heads) * l.key_head_dim;
  const int64_t value_dim = static_cast<int64_t>(l.num_value_heads) * l.value_head_dim;
  const int64_t conv_dim = 2 * key_dim + value_dim;
  const std::string p = prefix + ".linear_attn.";
  auto matrix = [&](const std::string& name, int64_t rows, int64_t cols) {
    return AsWeight(store.Require(p + name, {rows, cols}));
  };
  auto vector = [&](const std::string& name, int64_t n) { return ToF32Vector(store.Require(p + name, {n})); };
  GatedDeltaNetWeights w;
  w.in_proj_qkv = matrix("in_proj_qkv.weight", conv_dim, H);
  w.in_proj_z = matrix("in_proj_z.weight", value_dim, H);
  w.in_proj_b = matrix("in_proj_b.weight", l.num_value_heads, H);
  w.in_proj_a = matrix("in_proj_a.weight", l.num_value_heads, H);
  w.out_proj = matrix("out_proj.weight", H, value_dim);
  // [conv_dim][1][kernel] as transformers stores it; read as conv_dim rows of `kernel` and
  // transposed so that a row's taps run over contiguous channels.
  const Tensor& conv = store.Require(p + "conv1d.weight", {conv_dim, 1, l.conv_kernel});
  const WeightRef taps{conv.data, conv.dtype, conv_dim, l.conv_kernel, RowBytes(conv.dtype, l.conv_kernel)};
  std::vector<float> row(l.conv_kernel);
  w.conv.resize(static_cast<size_t>(conv_dim) * l.conv_kernel);
  for (int64_t ch = 0; ch < conv_dim; ++ch) {
    ops::DequantizeRow(taps, ch, row.data());
    for (int j = 0; j < l.conv_kernel; ++j) w.conv[static_cast<size_t>(j) * conv_dim + ch] = row[j];
  }
  if (store.Find(p + "A")) {
    w.neg_a = vector("A", l.num_value_heads);  // a GGUF's -exp(A_log), computed by its converter
  } else {
    for (float a : vector("A_log", l.num_value_heads)) w.neg_a.push_back(-std::exp(a));
  }
  w.dt_bias = vector("dt_bias", l.num_value_heads);
  w.norm = vector("norm.weight", l.value_head_dim);
  return w;
}

GatedDeltaNet::GatedDeltaNet(const TargetConfig& c, int max_rows, ThreadPool& pool)
    : pool_(pool),
      hidden_(c.decoder.hidden_size),
      kernel_(c.linear.conv_kernel),
      nk_(c.linear.num_key_heads),
      nv_(c.linear.num_value_heads),
      dk_(c.linear.key_head_dim),
      dv_(c.linear.value_head_dim),
      key_dim_(nk_ * dk_),
      value_dim_(nv_ * dv_),
      eps_(static_cast<float>(c.decoder.rms_norm_eps)) {
  if (dk_ > ops::kMaxDeltaRuleDim || dv_ > ops::kMaxDeltaRuleDim) {
    Fail("target: linear attention head dims ", dk_, " x ", dv_, " exceed ", ops::kMaxDeltaRuleDim);
  }
  const size_t R = max_rows;
  mixed_.resize(R * conv_dim());
  z_.resize(R * value_dim_);
  a_.resize(R * nv_);
  b_.resize(R * nv_);
  core_.resize(R * value_dim_);
}

void GatedDeltaNet::Mix(const GatedDeltaNetWeights& w, int n, GatedDeltaNetState& st) {
  const int C = conv_dim(), K = kernel_;
  // Input i of the window ending at row r: the state's for r - (K-1) + i < 0, else a row's.
  const auto input = [&](int idx) -> const float* {
    return idx < 0 ? st.conv_in + static_cast<size_t>(K - 1 + idx) * C : st.log_qkv + static_cast<size_t>(idx) * C;
  };
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(dk_));
  pool_.ParallelFor(n, [&](int64_t r) {
    float* out = mixed_.data() + r * C;
    for (int ch = 0; ch < C; ++ch) out[ch] = 0.0f;
    for (int j = 0; j < K; ++j) {
      const float* x = input(static_cast<int>(r) - (K - 1) + j);
      const float* tap = w.conv.data() + static_cast<size_t>(j) * C;
      for (int ch = 0; ch < C; ++ch) out[ch] = std::fma(tap[ch], x[ch], out[ch]);
    }
    for (int ch = 0; ch < C; ++ch) out[ch] = out[ch] * Sigmoid(out[ch]);
    for (int h = 0; h < nk_; ++h) {
      L2Normalize(out + h * dk_, dk_, q_scale);
      L2Normalize(out + key_dim_ + h * dk_, dk_, 1.0f);
    }
  });
  for (int i = 0; i < K - 1; ++i) {
    std::memcpy(st.conv_out + static_cast<size_t>(i) * C, input(n - (K - 1) + i), C * sizeof(float));
  }
}

void GatedDeltaNet::Recur(int n, GatedDeltaNetState& st, bool with_output) {
  const int C = conv_dim(), ratio = nv_ / nk_;
  const size_t head_state = static_cast<size_t>(dk_) * dv_;
  pool_.ParallelFor(nv_, [&](int64_t h) {
    const float* q = mixed_.data() + (h / ratio) * dk_;
    const float* k = q + key_dim_;
    const float* v = mixed_.data() + 2 * key_dim_ + h * dv_;
    ops::GatedDeltaRule(st.rec_in + h * head_state, st.rec_out + h * head_state, dk_, dv_, n,
                        with_output ? q : nullptr, k, C, v, C, st.log_decay + h, st.log_beta + h, nv_,
                        core_.data() + h * dv_, value_dim_);
  });
}

void GatedDeltaNet::Forward(const GatedDeltaNetWeights& w, const float* xn, int n, GatedDeltaNetState& st,
                            float* out, StageClock& clock) {
  const ops::MatMulOutput proj[] = {{&w.in_proj_qkv, nullptr, st.log_qkv},
                                    {&w.in_proj_z, nullptr, z_.data()},
                                    {&w.in_proj_b, nullptr, b_.data()},
                                    {&w.in_proj_a, nullptr, a_.data()}};
  ops::MatMulShared(xn, n, proj, pool_);
  clock.Mark(PassStage::kQkv);
  for (int64_t i = 0; i < static_cast<int64_t>(n) * nv_; ++i) {
    const int h = static_cast<int>(i % nv_);
    st.log_decay[i] = std::exp(w.neg_a[h] * Softplus(a_[i] + w.dt_bias[h]));
    st.log_beta[i] = Sigmoid(b_[i]);
  }
  Mix(w, n, st);
  Recur(n, st, /*with_output=*/true);
  pool_.ParallelFor(n, [&](int64_t r) {
    float* o = core_.data() + r * value_dim_;
    ops::RmsNorm(o, nv_, dv_, w.norm.data(), eps_, o);
    ops::SiluMul(z_.data() + r * value_dim_, o, value_dim_, o);
  });
  clock.Mark(PassStage::kLinearAttention);
  ops::MatMul(core_.data(), n, w.out_proj, nullptr, out, pool_);
  clock.Mark(PassStage::kOProj);
}

void GatedDeltaNet::Replay(const GatedDeltaNetWeights& w, int n, GatedDeltaNetState& st) {
  Mix(w, n, st);
  if (n == 0) {
    std::memcpy(st.rec_out, st.rec_in, recurrent_floats() * sizeof(float));
  } else {
    Recur(n, st, /*with_output=*/false);
  }
}

}  // namespace dflash
