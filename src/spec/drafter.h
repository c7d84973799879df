// What the speculative loop needs from a draft: accept committed tokens' target features,
// and propose logits for the block after an anchor token. DFlashDraft implements it; tests
// use scripted drafters that propose chosen tokens.
#pragma once

#include <cstdint>
#include <span>

#include "core/error.h"

namespace dflash {

class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual int max_block() const = 0;
  virtual int max_append() const = 0;
  // Target features ([n][F*H]) of committed tokens at positions [pos, pos+n).
  virtual void AppendContext(const float* features, int n, int pos) = 0;
  // Drafts a block of `block` positions after `anchor` at pos; Logits(j), j in [0, proposals),
  // then predicts the token at pos + 1 + j. proposals <= block - 1: a verify of fewer rows
  // than the block needs only the first ones, and a row's logits do not depend on how many
  // are made.
  virtual void Propose(int32_t anchor, int pos, int block, int proposals) = 0;
  virtual const float* Logits(int j) const = 0;

  // A draft with a candidate selector (DFlash2, draft/dflash2_selector.h) chooses row j's
  // proposal among selector_top_k() candidates, scored given the token chosen for row j - 1;
  // its proposal distribution is softmax(scores / T) over them, not its Logits rows. 0: none.
  virtual int selector_top_k() const { return 0; }
  // After Propose: row j's candidate ids and their scores given `previous` (the anchor for
  // j = 0). Valid until the next call.
  struct Candidates {
    std::span<const int32_t> ids;
    std::span<const float> scores;
  };
  virtual Candidates SelectAfter(int j, int32_t previous) {
    Fail("internal: SelectAfter(", j, ", ", previous, ") on a draft without a selector");
  }
};

}  // namespace dflash
