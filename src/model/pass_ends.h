// The two ends every target's Forward shares, whatever its layers: embedding the tokens, and
// after the last layer the final norm, the captured features a DFlash draft reads and the LM head.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/tensor.h"
#include "core/thread_pool.h"
#include "model/pass_profile.h"

namespace dflash {

// Rows of `embed` for `tokens` into x ([n][hidden]); a token outside [0, vocab) is an error.
void EmbedTokens(const WeightRef& embed, std::span<const int32_t> tokens, int vocab, int64_t hidden, float* x);

// Where a pass copies the outputs of the captured layers: row r's features are those layers'
// outputs in capture order, concatenated ([layers.size() * hidden]).
struct FeatureCapture {
  std::span<const int> layers;
  int64_t hidden = 0;
  float* features = nullptr;

  int64_t width() const { return static_cast<int64_t>(layers.size()) * hidden; }
  bool Has(int layer) const;
  void Copy(int layer, const float* rows, int n) const;  // rows: [n][hidden]
};

// The pass's end. x holds the last layer's output; the final norm goes to xn, on every row when
// the last layer is captured (HF's hidden_states[L], which z-lab's drafts read for layer L-1, is
// the normed output), else from the first row needing logits; logits for every row if all_logits,
// else for the last row only.
void FinishPass(const float* x, float* xn, int n, bool all_logits, const std::vector<float>& final_norm, float eps,
                int num_layers, const FeatureCapture& capture, const WeightRef& lm_head, float* logits,
                ThreadPool& pool, StageClock& clock);

}  // namespace dflash
