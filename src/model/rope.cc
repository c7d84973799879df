#include "model/rope.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace dflash {

namespace {

// The inverse frequencies and cos/sin multiplier, following transformers'
// modeling_rope_utils (float32 where it computes in float32).
std::vector<float> InverseFrequencies(const RopeConfig& c, int dim, float* attention_scaling) {
  const int half = dim / 2;
  std::vector<float> base_freq(half);
  for (int i = 0; i < half; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(dim);
    base_freq[i] = static_cast<float>(std::pow(c.theta, static_cast<double>(exponent)));
  }
  std::vector<float> inv(half);
  *attention_scaling = 1.0f;
  if (c.type == "default" || c.type == "linear") {
    const float factor = c.type == "linear" ? static_cast<float>(c.factor) : 1.0f;
    for (int i = 0; i < half; ++i) inv[i] = 1.0f / base_freq[i] / factor;  // /1 is exact
    return inv;
  }
  // YaRN: blend interpolated and extrapolated frequencies over a linear ramp of dimensions.
  auto mscale = [](double scale, double m) { return scale <= 1 ? 1.0 : 0.1 * m * std::log(scale) + 1.0; };
  double attention = c.attention_factor;
  if (attention < 0) {
    attention = (c.mscale != 0 && c.mscale_all_dim != 0)
                    ? mscale(c.factor, c.mscale) / mscale(c.factor, c.mscale_all_dim)
                    : mscale(c.factor, 1.0);
  }
  *attention_scaling = static_cast<float>(attention);
  auto correction_dim = [&](double rotations) {
    return (dim * std::log(c.original_max_position_embeddings / (rotations * 2 * M_PI))) /
           (2 * std::log(c.theta));
  };
  double low = correction_dim(c.beta_fast), high = correction_dim(c.beta_slow);
  if (c.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;
  for (int i = 0; i < half; ++i) {
    const float ramp = std::clamp(static_cast<float>((static_cast<float>(i) - low) / (high - low)), 0.0f, 1.0f);
    const float extrapolation_weight = 1.0f - ramp;
    const float extrapolated = 1.0f / base_freq[i];
    const float interpolated = 1.0f / (static_cast<float>(c.factor) * base_freq[i]);
    inv[i] = interpolated * (1.0f - extrapolation_weight) + extrapolated * extrapolation_weight;
  }
  return inv;
}

}  // namespace

Rope::Rope(const RopeConfig& config, int head_dim, int max_positions)
    : head_dim_(head_dim),
      half_(static_cast<int>(head_dim * config.partial_rotary_factor) / 2),
      max_positions_(max_positions) {
  float scaling = 1.0f;
  const std::vector<float> inv = InverseFrequencies(config, 2 * half_, &scaling);
  cos_.resize(static_cast<size_t>(max_positions) * half_);
  sin_.resize(cos_.size());
  for (int p = 0; p < max_positions; ++p) {
    for (int i = 0; i < half_; ++i) {
      const float angle = inv[i] * static_cast<float>(p);  // float32 product, as transformers
      cos_[static_cast<size_t>(p) * half_ + i] = static_cast<float>(std::cos(static_cast<double>(angle))) * scaling;
      sin_[static_cast<size_t>(p) * half_ + i] = static_cast<float>(std::sin(static_cast<double>(angle))) * scaling;
    }
  }
}

void Rope::Apply(float* x, int n_heads, int pos) const {
  if (pos < 0 || pos >= max_positions_) Fail("position ", pos, " is outside the rotary table (", max_positions_, ")");
  const float* c = cos_.data() + static_cast<size_t>(pos) * half_;
  const float* s = sin_.data() + static_cast<size_t>(pos) * half_;
  for (int h = 0; h < n_heads; ++h) {
    float* lo = x + static_cast<size_t>(h) * head_dim_;
    float* hi = lo + half_;
    for (int i = 0; i < half_; ++i) {
      const float a = lo[i], b = hi[i];
      lo[i] = a * c[i] - b * s[i];
      hi[i] = b * c[i] + a * s[i];
    }
  }
}

}  // namespace dflash
