#include "spec/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"

namespace dflash {

void ValidateSampling(const SamplingParams& p) {
  if (!(p.temperature >= 0) || !std::isfinite(p.temperature)) {
    Fail("temperature must be a finite number >= 0, got ", p.temperature);
  }
  if (p.top_k < 0) Fail("top_k must be >= 0, got ", p.top_k);
  if (!(p.top_p > 0 && p.top_p <= 1)) Fail("top_p must be in (0, 1], got ", p.top_p);
}

Sampler::Sampler(const SamplingParams& params, int vocab)
    : params_(params), vocab_(vocab), order_(vocab) {
  ValidateSampling(params);
}

int32_t Sampler::Argmax(const float* logits, int vocab) {
  int32_t best = 0;
  for (int32_t i = 1; i < vocab; ++i) {
    if (logits[i] > logits[best]) best = i;
  }
  return best;
}

void Sampler::Probabilities(const float* logits, float* probs) {
  const float inv_t = static_cast<float>(1.0 / params_.temperature);
  const int k = (params_.top_k > 0 && params_.top_k < vocab_) ? params_.top_k : vocab_;
  // Candidates: all tokens, or the top k by logit.
  std::iota(order_.begin(), order_.end(), 0);
  auto by_logit = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  if (k < vocab_) std::nth_element(order_.begin(), order_.begin() + k, order_.end(), by_logit);
  float max_score = -INFINITY;
  for (int i = 0; i < k; ++i) max_score = std::max(max_score, logits[order_[i]] * inv_t);
  std::fill(probs, probs + vocab_, 0.0f);
  double sum = 0;
  for (int i = 0; i < k; ++i) {
    const float e = std::exp(logits[order_[i]] * inv_t - max_score);
    probs[order_[i]] = e;
    sum += e;
  }
  for (int i = 0; i < k; ++i) probs[order_[i]] = static_cast<float>(probs[order_[i]] / sum);
  if (params_.top_p >= 1.0) return;
  // Nucleus: keep the smallest prefix (by descending probability) whose mass reaches top_p;
  // a token is kept when the mass before it is below top_p.
  std::sort(order_.begin(), order_.begin() + k, [&](int32_t a, int32_t b) {
    return probs[a] > probs[b] || (probs[a] == probs[b] && a < b);
  });
  double before = 0, kept = 0;
  int i = 0;
  for (; i < k; ++i) {
    const float p = probs[order_[i]];
    if (before >= params_.top_p) break;
    before += p;
    kept += p;
  }
  for (int j = i; j < k; ++j) probs[order_[j]] = 0.0f;
  for (int j = 0; j < i; ++j) probs[order_[j]] = static_cast<float>(probs[order_[j]] / kept);
}

namespace {

// u(seed, position) in [0, 1): SplitMix64's finaliser of the seed and the position mixed,
// 53 random bits.
double PositionUniform(uint64_t seed, int64_t position) {
  uint64_t x = seed ^ (static_cast<uint64_t>(position) + 1) * 0x9E3779B97F4A7C15ull;
  for (int round = 0; round < 2; ++round) {
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    x ^= x >> 31;
  }
  return static_cast<double>(x >> 11) * 0x1.0p-53;
}

}  // namespace

int32_t Sampler::DrawAt(const float* probs, int64_t position) const {
  double total = 0;
  for (int i = 0; i < vocab_; ++i) total += probs[i];
  const double u = PositionUniform(params_.seed, position) * total;
  double acc = 0;
  int32_t last_nonzero = 0;
  for (int32_t i = 0; i < vocab_; ++i) {
    if (probs[i] <= 0) continue;
    acc += probs[i];
    last_nonzero = i;
    if (u < acc) return i;
  }
  return last_nonzero;  // rounding left u at the very top
}

}  // namespace dflash
