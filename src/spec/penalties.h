// Penalties on tokens the sequence already holds, applied to logits before temperature and the
// filters (spec/sampler.h), identically to the target's rows, the draft's rows and plain decoding:
//
//   repetition (transformers' RepetitionPenaltyLogitsProcessor): for every token in the prompt
//     or the generated text, a logit > 0 is divided by r and one < 0 multiplied by it;
//   frequency and presence (OpenAI): logit -= frequency * c + presence * (c > 0), with c the
//     number of times the token was generated (the prompt does not count).
//
// Repetition first, then frequency and presence, as vLLM and llama.cpp order them. The history
// grows by Add and, for a drafted token that a verify may reject, shrinks by Remove: each is
// O(1), and Apply makes no allocation, so the decoding loop keeps one Penalties per generation.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "spec/sampler.h"

namespace dflash {

class Penalties {
 public:
  // Nothing is allocated when `params` sets no penalty (active() is false).
  Penalties(const SamplingParams& params, int vocab);

  bool active() const { return active_; }
  // The prompt (the repetition penalty's history besides the generated tokens). Throws Error
  // naming the id when a token is outside the vocabulary.
  void SetPrompt(std::span<const int32_t> prompt);
  void Add(int32_t generated);     // a generated token joins the history
  void Remove(int32_t generated);  // one Add undone
  // out = logits penalised for the history ([vocab] each; out may be logits).
  void Apply(const float* logits, float* out) const;

 private:
  void CheckToken(int32_t token) const;

  const bool active_;
  const int vocab_;
  const float repetition_, frequency_, presence_;
  std::vector<int32_t> generated_count_;  // [vocab]
  std::vector<uint8_t> in_prompt_;        // [vocab]
};

}  // namespace dflash
