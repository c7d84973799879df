// Token selection: greedy argmax and temperature / top-k / top-p sampling.
//
// Sampling is coupled to the position: the token at sequence position t is the inverse CDF of
// its distribution (tokens in index order) at one uniform u(seed, t), a hash, not the next
// number of a stream. So a sampled sequence is a function of the seed and the model alone: a
// draft's proposal for position t uses the same u(seed, t), and the target accepts it exactly
// when its own draw at t is that token, which makes sampled DFlash output equal plain sampled
// output for the same seed token for token, whatever blocks, verify lengths or policy
// decisions happened in between (as greedy DFlash equals greedy decoding). Each position's u
// is independent of the others, so every token is an exact draw from the target's
// distribution given the ones before it. The price: a proposal is accepted with probability
// sum_x |[F_p(x-), F_p(x)) n [F_q(x-), F_q(x))| (the overlap of the two CDFs' steps), a little
// below rejection sampling's sum_x min(p(x), q(x)); both are 1 when q = p.
#pragma once

#include <cstdint>
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
  // The token at sequence position `position`: inverse CDF of probs (which need not sum to
  // 1) at u(seed, position).
  int32_t DrawAt(const float* probs, int64_t position) const;

 private:
  SamplingParams params_;
  int vocab_;
  std::vector<int32_t> order_;  // [vocab] scratch for top-k / top-p
};

}  // namespace dflash
