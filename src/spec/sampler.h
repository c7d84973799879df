// Token selection: greedy argmax, temperature / top-k / top-p sampling, and the speculative
// rejection step that keeps sampled DFlash output distributed exactly as the target's.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace dflash {

struct SamplingParams {
  double temperature = 0.0;  // <= 0: greedy
  int top_k = 0;             // 0: off
  double top_p = 1.0;        // 1: off
  uint64_t seed = 0;
  bool greedy() const { return temperature <= 0; }
};

// Throws Error naming the parameter when a value is out of range.
void ValidateSampling(const SamplingParams& p);

class Sampler {
 public:
  Sampler(const SamplingParams& params, int vocab);

  const SamplingParams& params() const { return params_; }
  // Lowest index among the maxima (torch.argmax's tie rule).
  static int32_t Argmax(const float* logits, int vocab);
  // probs = the sampling distribution of logits after temperature, top-k, top-p ([vocab]).
  void Probabilities(const float* logits, float* probs);
  int32_t Draw(const float* probs);
  double Uniform() { return uniform_(rng_); }

  // Speculative acceptance of n drafted tokens. target_probs: n+1 rows, draft_probs: n rows
  // ([vocab] each). Returns the number accepted and writes the next token (the residual
  // sample on rejection, or a draw from target row n when all are accepted).
  int AcceptSampled(const int32_t* drafted, int n, const float* target_probs,
                    const float* draft_probs, int32_t* next);

 private:
  SamplingParams params_;
  int vocab_;
  std::mt19937_64 rng_;
  std::uniform_real_distribution<double> uniform_{0.0, 1.0};
  std::vector<int32_t> order_;    // [vocab] scratch for top-k / top-p
  std::vector<float> residual_;   // [vocab]
};

}  // namespace dflash
