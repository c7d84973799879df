// Rotary position embedding ("rotate half", neox layout) with transformers' default, linear
// and YaRN frequency schedules. cos/sin are tabulated per position once, at construction.
// With a partial_rotary_factor below 1 only each head's first int(head_dim * factor) dims
// rotate (their frequencies computed over that width); the rest pass through.
#pragma once

#include <vector>

#include "model/config.h"

namespace dflash {

class Rope {
 public:
  Rope(const RopeConfig& config, int head_dim, int max_positions);

  // Rotates `n_heads` consecutive heads of head_dim floats in place, for position `pos`.
  void Apply(float* x, int n_heads, int pos) const;
  int max_positions() const { return max_positions_; }

 private:
  int head_dim_ = 0;
  int half_ = 0;  // half the rotary dims
  int max_positions_ = 0;
  std::vector<float> cos_, sin_;  // [max_positions][half]
};

}  // namespace dflash
