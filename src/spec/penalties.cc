#include "spec/penalties.h"

#include <algorithm>

#include "core/error.h"

namespace dflash {

Penalties::Penalties(const SamplingParams& params, int vocab)
    : active_(params.penalised()),
      vocab_(vocab),
      repetition_(static_cast<float>(params.repetition_penalty)),
      frequency_(static_cast<float>(params.frequency_penalty)),
      presence_(static_cast<float>(params.presence_penalty)) {
  if (!active_) return;
  generated_count_.assign(vocab, 0);
  in_prompt_.assign(vocab, 0);
}

void Penalties::CheckToken(int32_t token) const {
  if (token < 0 || token >= vocab_) Fail("token id ", token, " is outside the vocabulary of ", vocab_);
}

void Penalties::SetPrompt(std::span<const int32_t> prompt) {
  if (!active_) return;
  std::fill(in_prompt_.begin(), in_prompt_.end(), 0);
  for (int32_t t : prompt) {
    CheckToken(t);
    in_prompt_[t] = 1;
  }
}

void Penalties::Add(int32_t generated) {
  if (!active_) return;
  CheckToken(generated);
  generated_count_[generated]++;
}

void Penalties::Remove(int32_t generated) {
  if (!active_) return;
  CheckToken(generated);
  if (generated_count_[generated] == 0) Fail("internal: penalty history removes token ", generated, " it does not hold");
  generated_count_[generated]--;
}

void Penalties::Apply(const float* logits, float* out) const {
  if (!active_) {
    std::copy(logits, logits + vocab_, out);
    return;
  }
  for (int t = 0; t < vocab_; ++t) {
    float x = logits[t];
    const int32_t count = generated_count_[t];
    if (count > 0 || in_prompt_[t]) x = x < 0 ? x * repetition_ : x / repetition_;
    if (count > 0) x -= frequency_ * static_cast<float>(count) + presence_;
    out[t] = x;
  }
}

}  // namespace dflash
