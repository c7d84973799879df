#include "model/pass_ends.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "ops/ops.h"

namespace dflash {

void EmbedTokens(const WeightRef& embed, std::span<const int32_t> tokens, int vocab, int64_t hidden, float* x) {
  for (size_t r = 0; r < tokens.size(); ++r) {
    if (tokens[r] < 0 || tokens[r] >= vocab) Fail("token id ", tokens[r], " is outside the vocabulary (", vocab, ")");
    ops::DequantizeRow(embed, tokens[r], x + r * hidden);
  }
}

bool FeatureCapture::Has(int layer) const { return std::find(layers.begin(), layers.end(), layer) != layers.end(); }

void FeatureCapture::Copy(int layer, const float* rows, int n) const {
  for (size_t f = 0; f < layers.size(); ++f) {
    if (layers[f] != layer) continue;
    for (int r = 0; r < n; ++r) {
      std::memcpy(features + r * width() + f * hidden, rows + r * hidden, hidden * sizeof(float));
    }
  }
}

void FinishPass(const float* x, float* xn, int n, bool all_logits, const std::vector<float>& final_norm, float eps,
                int num_layers, const FeatureCapture& capture, const WeightRef& lm_head, float* logits,
                ThreadPool& pool, StageClock& clock) {
  const int64_t H = capture.hidden;
  const bool capture_last = capture.Has(num_layers - 1);
  const int first = all_logits ? 0 : n - 1;
  const int normed = capture_last ? 0 : first;
  ops::RmsNorm(x + normed * H, n - normed, H, final_norm.data(), eps, xn);
  if (capture_last) capture.Copy(num_layers - 1, xn, n);
  clock.Mark(PassStage::kOther);
  ops::MatMul(xn + (first - normed) * H, n - first, lm_head, nullptr, logits, pool);
  clock.Mark(PassStage::kLmHead);
}

}  // namespace dflash
