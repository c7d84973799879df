// What the speculative loop needs from a draft: accept committed tokens' target features,
// and propose logits for the block after an anchor token. DFlashDraft implements it; tests
// use scripted drafters that propose chosen tokens.
#pragma once

#include <cstdint>

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
};

}  // namespace dflash
