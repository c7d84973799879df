// A drafter for losslessness tests: proposes the reference continuation (plain greedy output)
// with one mistake per cycle, the intended acceptance length cycling through 0..B-1 so that every
// length occurs.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "spec/drafter.h"

namespace dflash::testing {

class CyclingDrafter : public Drafter {
 public:
  // perfect: no mistakes at all (every drafted token is the target's).
  CyclingDrafter(std::vector<int32_t> reference, int prompt_len, int vocab, bool perfect = false)
      : ref_(std::move(reference)), prompt_len_(prompt_len), vocab_(vocab), perfect_(perfect), logits_(16 * vocab) {}
  int max_block() const override { return 16; }
  int max_append() const override { return 1 << 20; }
  void AppendContext(const float*, int n, int pos) override {
    EXPECT_EQ(pos, context_) << "context must grow contiguously";
    context_ += n;
  }
  void Propose(int32_t, int pos, int block, int proposals) override {
    EXPECT_EQ(pos, context_) << "draft must see exactly the committed context";
    const int intended = cycle_++ % block;  // accept this many, then be wrong
    for (int j = 0; j < proposals; ++j) {
      const size_t idx = static_cast<size_t>(pos + 1 + j - prompt_len_);
      int32_t tok = idx < ref_.size() ? ref_[idx] : 0;
      if (j == intended && !perfect_) tok = (tok + 1) % vocab_;
      float* row = logits_.data() + static_cast<size_t>(j) * vocab_;
      std::fill(row, row + vocab_, 0.0f);
      row[tok] = 10.0f;
    }
  }
  const float* Logits(int j) const override { return logits_.data() + static_cast<size_t>(j) * vocab_; }

 private:
  std::vector<int32_t> ref_;
  int prompt_len_, vocab_;
  bool perfect_;
  int cycle_ = 0, context_ = 0;
  std::vector<float> logits_;
};

}  // namespace dflash::testing
