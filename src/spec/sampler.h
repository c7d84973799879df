// Token selection: greedy argmax and temperature / top-k / top-p / min-p sampling, and the two
// ways sampled DFlash can accept a draft (SpecSampling).
//
// Every draw is coupled to its sequence position: the token at position t is the inverse CDF of
// its distribution (tokens in index order) at one uniform u(seed, t, stream), a hash, not the
// next number of a stream. So a run's tokens are a function of the seed, the model and (for
// rejection sampling) the verify lengths alone, and each position's uniforms are independent of
// every other position's.
//
// kReproducible: the draft proposes its own draw at u(seed, t) and the target accepts it exactly
// when its draw at t is that token. Sampled DFlash then equals plain sampling for the same seed
// token for token, whatever the blocks, verify lengths or policy decisions (as greedy DFlash
// equals greedy decoding). The price: a proposal is accepted with probability
// sum_x |[F_p(x-), F_p(x)) n [F_q(x-), F_q(x))| (the overlap of the two CDFs' steps), which for
// untruncated sampling is far below sum_x min(p(x), q(x)) (measured 0.07-0.10 against 0.28 on
// the shipped pair at T = 1); both are 1 when q = p.
//
// kRejection (the default): speculative rejection sampling as z-lab's dflash_generate does it.
// The draft samples x ~ q; the target accepts it with probability min(1, p(x)/q(x)); on the
// first rejection the token is drawn from normalise(max(0, p - q)); after a fully accepted block
// the bonus token is drawn from p. Each committed token is an exact draw from the target's
// distribution given the ones before it, and a draft is accepted with probability
// sum_x min(p(x), q(x)), the most any lossless rule can. But which uniforms decide a position
// depends on whether it was drafted, so the tokens change with the verify lengths the policy
// picks: exact in distribution, not seed-reproducible across policies.
//
// A DFlash2 draft (spec/drafter.h's selector) proposes from softmax(scores / T) over its top-k
// candidates, unfiltered (SelectorProbabilities), as z-lab's CandidateSelector does. That q is
// zero off the candidates, so max(0, p - q) is p there and p - q clamped on them: the residual
// z-lab forms by scattering -q onto draft_indices.
//
// Filtering, in transformers' order (temperature, top-k, top-p, min-p), applied identically to p,
// q and plain decoding. Ties at a boundary: top-k keeps exactly k tokens, the lower token id
// first among equal logits (transformers' TopKLogitsWarper keeps every token tied with the k-th);
// top-p keeps tokens in descending probability, the lower id first among equals, while the mass
// before them is below top_p (transformers removes from an ascending torch.sort, whose order
// among equal values is unspecified); min-p removes tokens whose probability is below min_p
// times the largest.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace dflash {

enum class SpecSampling {
  kRejection,     // speculative rejection sampling: exact in distribution, most acceptance
  kReproducible,  // coupled draws: the same tokens as plain sampling for the same seed
};

SpecSampling ParseSpecSampling(std::string_view name);  // "rejection" | "reproducible"
std::string_view SpecSamplingName(SpecSampling s);

struct SamplingParams {
  // Temperatures below this are greedy. At T = 1e-5 two logits 1e-3 apart (below the rounding
  // noise of bf16 weights) already differ by e^-100 in probability, which float32 rounds to
  // (almost) nothing, so sampling there is argmax in all but name; and 1 / T of a smaller T
  // overflows float32 (1 / 1e-39 = inf), which turned every probability into NaN.
  static constexpr double kGreedyBelow = 1e-5;

  double temperature = 0.0;  // < kGreedyBelow: greedy
  int top_k = 0;             // 0: off
  double top_p = 1.0;        // 1: off
  uint64_t seed = 0;
  double min_p = 0.0;        // 0: off
  // Penalties on the logits, before temperature (spec/penalties.h): OpenAI's presence and
  // frequency penalties over the generated tokens, in [-2, 2] (0: off), and transformers'
  // repetition penalty over the prompt and the generated tokens, > 0 (1: off). They apply to
  // greedy decoding too.
  double presence_penalty = 0.0;
  double frequency_penalty = 0.0;
  double repetition_penalty = 1.0;
  SpecSampling spec = SpecSampling::kRejection;
  bool greedy() const { return temperature < kGreedyBelow; }
  bool penalised() const { return presence_penalty != 0 || frequency_penalty != 0 || repetition_penalty != 1; }
  // Whether DFlash output equals plain output token for token for the same seed.
  bool same_tokens_as_plain() const { return greedy() || spec == SpecSampling::kReproducible; }
};

// Throws Error naming the parameter when a value is out of range.
void ValidateSampling(const SamplingParams& p);

// Which draw at a position a uniform is for: each has its own, independent of the others.
enum class Stream { kTarget, kDraft, kAccept, kResidual };

// The verdict on one drafted token under rejection sampling.
struct Verdict {
  bool accepted;
  int32_t token;  // the draft when accepted, else the residual's draw
};

class Sampler {
 public:
  Sampler(const SamplingParams& params, int vocab);

  const SamplingParams& params() const { return params_; }
  // Lowest index among the maxima (torch.argmax's tie rule). Throws on a NaN or infinite logit.
  static int32_t Argmax(const float* logits, int vocab);
  // probs = the sampling distribution of logits after temperature, top-k, top-p, min-p
  // ([vocab]). Throws on a NaN or infinite logit.
  void Probabilities(const float* logits, float* probs);
  // probs ([vocab]) = softmax(scores / T) over the candidate ids (distinct), zero elsewhere:
  // a DFlash2 selector's proposal distribution. Throws on a NaN or infinite score.
  void SelectorProbabilities(std::span<const int32_t> ids, std::span<const float> scores, float* probs) const;
  // The token at sequence position `position`: inverse CDF of probs (which need not sum to
  // 1) at u(seed, position, stream).
  int32_t DrawAt(const float* probs, int64_t position, Stream stream = Stream::kTarget) const;
  // Rejection sampling at the drafted position `position`: `draft` was drawn from q; accept it
  // with probability min(1, p(draft) / q(draft)), else draw from normalise(max(0, p - q)).
  // residual: [vocab] scratch.
  Verdict AcceptOrResample(const float* p, const float* q, int32_t draft, int64_t position, float* residual) const;

 private:
  // Filters over the candidates order_[0, n): each returns how many stay first in order_.
  int TopK(const float* logits);  // fills order_
  int TopP(const float* probs, int n);
  int MinP(const float* probs, int n);
  void Softmax(const float* logits, int n, float* probs) const;
  // Zeroes the candidates order_[keep, n) and renormalises order_[0, keep).
  void Keep(float* probs, int n, int keep) const;

  SamplingParams params_;
  int vocab_;
  std::vector<int32_t> order_;  // [vocab] scratch for top-k / top-p
};

}  // namespace dflash
