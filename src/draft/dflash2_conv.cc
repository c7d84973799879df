#include "draft/dflash2_conv.h"

#include <algorithm>
#include <cstring>

#include "ops/ops.h"

namespace dflash {

namespace {

// A [2][K][H] tensor as f32 (any stored float type).
std::vector<float> LoadBase(const Tensor& t, int kernel, int hidden) {
  WeightRef w;
  w.data = t.data;
  w.dtype = t.dtype;
  w.rows = 2 * kernel;
  w.cols = hidden;
  w.row_bytes = RowBytes(t.dtype, hidden);
  std::vector<float> out(static_cast<size_t>(w.rows) * hidden);
  for (int64_t r = 0; r < w.rows; ++r) ops::DequantizeRow(w, r, out.data() + r * hidden);
  return out;
}

}  // namespace

DynamicConvs::DynamicConvs(const DraftConfig& config, const TensorStore& store, int max_rows)
    : hidden_(config.decoder.hidden_size),
      kernel_(config.conv_kernel_size),
      group_size_(config.conv_group_size),
      groups_(config.decoder.hidden_size / config.conv_group_size) {
  for (int l = 0; l < config.decoder.num_layers; ++l) {
    for (const char* site : {"attention_conv", "mlp_conv"}) {
      const std::string prefix = "layers." + std::to_string(l) + "." + site;
      Conv c;
      c.base = LoadBase(store.Require(prefix + ".base_kernel", {2, kernel_, hidden_}), kernel_, hidden_);
      c.projection = AsWeight(store.Require(prefix + ".kernel_projection.weight", {2 * kernel_ * groups_, hidden_}));
      convs_.push_back(std::move(c));
    }
  }
  dynamic_.resize(static_cast<size_t>(max_rows) * 2 * kernel_ * groups_);
  out_.resize(static_cast<size_t>(max_rows) * hidden_);
}

void DynamicConvs::Convolve(const Conv& conv, int half, float* rows, int B, ThreadPool& pool) {
  const int KG = kernel_ * groups_;
  pool.ParallelFor(B, [&](int64_t t) {
    float* out = out_.data() + t * hidden_;
    const float* dynamic = dynamic_.data() + (t * 2 + half) * KG;
    std::fill(out, out + hidden_, 0.0f);
    // Taps in z-lab's order (offset 0 first; base, then dynamic), so rounding follows it.
    for (int o = 0; o < kernel_ && o <= t; ++o) {
      const float* in = rows + (t - o) * hidden_;
      const float* base = conv.base.data() + (static_cast<size_t>(half) * kernel_ + o) * hidden_;
      for (int g = 0; g < groups_; ++g) {
        const float d = dynamic[o * groups_ + g];
        for (int i = g * group_size_; i < (g + 1) * group_size_; ++i) {
          out[i] += base[i] * in[i];
          out[i] += d * in[i];
        }
      }
    }
  });
  std::memcpy(rows, out_.data(), static_cast<size_t>(B) * hidden_ * sizeof(float));
}

void DynamicConvs::Prepare(int layer, Site site, float* rows, int B, ThreadPool& pool) {
  const Conv& conv = convs_[layer * 2 + site];
  ops::MatMul(rows, B, conv.projection, nullptr, dynamic_.data(), pool);
  Convolve(conv, 0, rows, B, pool);
}

void DynamicConvs::Finish(int layer, Site site, float* rows, int B, ThreadPool& pool) {
  Convolve(convs_[layer * 2 + site], 1, rows, B, pool);
}

}  // namespace dflash
