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
  // Logits(j), j in [0, block-1), predict the token at pos + 1 + j after `anchor` at pos.
  virtual void Propose(int32_t anchor, int pos, int block) = 0;
  virtual const float* Logits(int j) const = 0;
};

}  // namespace dflash
