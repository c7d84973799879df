#include "spec/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"

namespace dflash {

SpecSampling ParseSpecSampling(std::string_view name) {
  if (name == "rejection") return SpecSampling::kRejection;
  if (name == "reproducible") return SpecSampling::kReproducible;
  Fail("spec sampling must be 'rejection' or 'reproducible', got '", name, "'");
}

std::string_view SpecSamplingName(SpecSampling s) {
  return s == SpecSampling::kRejection ? "rejection" : "reproducible";
}

void ValidateSampling(const SamplingParams& p) {
  if (!(p.temperature >= 0) || !std::isfinite(p.temperature)) {
    Fail("temperature must be a finite number >= 0, got ", p.temperature);
  }
  if (p.top_k < 0) Fail("top_k must be >= 0, got ", p.top_k);
  if (!(p.top_p > 0 && p.top_p <= 1)) Fail("top_p must be in (0, 1], got ", p.top_p);
  if (!(p.min_p >= 0 && p.min_p <= 1)) Fail("min_p must be in [0, 1], got ", p.min_p);
  if (!(p.presence_penalty >= -2 && p.presence_penalty <= 2)) {
    Fail("presence_penalty must be in [-2, 2], got ", p.presence_penalty);
  }
  if (!(p.frequency_penalty >= -2 && p.frequency_penalty <= 2)) {
    Fail("frequency_penalty must be in [-2, 2], got ", p.frequency_penalty);
  }
  if (!(p.repetition_penalty > 0) || !std::isfinite(p.repetition_penalty)) {
    Fail("repetition_penalty must be a finite number > 0, got ", p.repetition_penalty);
  }
}

namespace {

// A NaN or infinite logit means broken weights or a broken kernel: never turn it into a token.
void CheckFinite(const float* logits, int vocab) {
  for (int i = 0; i < vocab; ++i) {
    if (!std::isfinite(logits[i])) {
      Fail("the model produced a non-finite logit (", logits[i], ") for token id ", i,
           " of ", vocab, ": refusing to sample from it");
    }
  }
}

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

// Each stream hashes the seed with its own constant; the target's is 0, so plain sampling's
// draws are those of the seed itself.
double StreamUniform(uint64_t seed, int64_t position, Stream stream) {
  static constexpr uint64_t kSalt[] = {0, 0xD1B54A32D192ED03ull, 0x8CB92BA72F3D8DD7ull, 0xABC98388FB8FAC03ull};
  return PositionUniform(seed ^ kSalt[static_cast<int>(stream)], position);
}

}  // namespace

Sampler::Sampler(const SamplingParams& params, int vocab)
    : params_(params), vocab_(vocab), order_(vocab) {
  ValidateSampling(params);
}

int32_t Sampler::Argmax(const float* logits, int vocab) {
  CheckFinite(logits, vocab);
  int32_t best = 0;
  for (int32_t i = 1; i < vocab; ++i) {
    if (logits[i] > logits[best]) best = i;
  }
  return best;
}

int Sampler::TopK(const float* logits) {
  const int k = (params_.top_k > 0 && params_.top_k < vocab_) ? params_.top_k : vocab_;
  std::iota(order_.begin(), order_.end(), 0);
  auto by_logit = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  if (k < vocab_) std::nth_element(order_.begin(), order_.begin() + k, order_.end(), by_logit);
  return k;
}

void Sampler::Softmax(const float* logits, int n, float* probs) const {
  const float inv_t = static_cast<float>(1.0 / params_.temperature);  // finite: not greedy
  float max_score = -INFINITY;
  for (int i = 0; i < n; ++i) max_score = std::max(max_score, logits[order_[i]] * inv_t);
  double sum = 0;
  for (int i = 0; i < n; ++i) {
    const float e = std::exp(logits[order_[i]] * inv_t - max_score);
    probs[order_[i]] = e;
    sum += e;
  }
  for (int i = 0; i < n; ++i) probs[order_[i]] = static_cast<float>(probs[order_[i]] / sum);
}

int Sampler::TopP(const float* probs, int n) {
  // Nucleus: keep the smallest prefix (by descending probability) whose mass reaches top_p;
  // a token is kept when the mass before it is below top_p.
  std::sort(order_.begin(), order_.begin() + n, [&](int32_t a, int32_t b) {
    return probs[a] > probs[b] || (probs[a] == probs[b] && a < b);
  });
  double before = 0;
  int i = 0;
  for (; i < n && before < params_.top_p; ++i) before += probs[order_[i]];
  return i;
}

int Sampler::MinP(const float* probs, int n) {
  float max_p = 0;
  for (int i = 0; i < n; ++i) max_p = std::max(max_p, probs[order_[i]]);
  const double floor = params_.min_p * max_p;  // the largest always stays: min_p <= 1
  return static_cast<int>(std::partition(order_.begin(), order_.begin() + n, [&](int32_t t) { return probs[t] >= floor; }) -
                          order_.begin());
}

void Sampler::Keep(float* probs, int n, int keep) const {
  if (keep == n) return;
  double kept = 0;
  for (int j = 0; j < keep; ++j) kept += probs[order_[j]];
  for (int j = keep; j < n; ++j) probs[order_[j]] = 0.0f;
  for (int j = 0; j < keep; ++j) probs[order_[j]] = static_cast<float>(probs[order_[j]] / kept);
}

void Sampler::Probabilities(const float* logits, float* probs) {
  std::fill(probs, probs + vocab_, 0.0f);
  if (params_.greedy()) {
    probs[Argmax(logits, vocab_)] = 1.0f;
    return;
  }
  CheckFinite(logits, vocab_);
  // order_[0, n) holds the candidates left after each filter.
  int n = TopK(logits);
  Softmax(logits, n, probs);
  if (params_.top_p < 1.0) {
    const int keep = TopP(probs, n);
    Keep(probs, n, keep);
    n = keep;
  }
  if (params_.min_p > 0) Keep(probs, n, MinP(probs, n));
}

void Sampler::SelectorProbabilities(std::span<const int32_t> ids, std::span<const float> scores, float* probs) const {
  const int k = static_cast<int>(scores.size());
  CheckFinite(scores.data(), k);
  std::fill(probs, probs + vocab_, 0.0f);
  const float inv_t = static_cast<float>(1.0 / params_.temperature);  // finite: not greedy
  float max_score = -INFINITY;
  for (int c = 0; c < k; ++c) max_score = std::max(max_score, scores[c] * inv_t);
  double sum = 0;
  for (int c = 0; c < k; ++c) sum += probs[ids[c]] = std::exp(scores[c] * inv_t - max_score);
  for (int c = 0; c < k; ++c) probs[ids[c]] = static_cast<float>(probs[ids[c]] / sum);
}

int32_t Sampler::DrawAt(const float* probs, int64_t position, Stream stream) const {
  double total = 0;
  for (int i = 0; i < vocab_; ++i) total += probs[i];
  if (!(total > 0) || !std::isfinite(total)) {
    Fail("sampling distribution at position ", position, " has no finite positive mass (sum ", total, ")");
  }
  const double u = StreamUniform(params_.seed, position, stream) * total;
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

Verdict Sampler::AcceptOrResample(const float* p, const float* q, int32_t draft, int64_t position,
                                  float* residual) const {
  // u < p/q, without dividing by a q that may be tiny.
  if (StreamUniform(params_.seed, position, Stream::kAccept) * q[draft] < p[draft]) return {true, draft};
  double mass = 0;
  for (int i = 0; i < vocab_; ++i) {
    residual[i] = std::max(0.0f, p[i] - q[i]);
    mass += residual[i];
  }
  // Rounding can reject when p equals q but for the last bit, leaving no residual mass: p is
  // then the residual's limit.
  return {false, DrawAt(mass > 0 ? residual : p, position, Stream::kResidual)};
}

}  // namespace dflash
