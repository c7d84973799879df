// Rotary position embedding ("rotate half", neox layout) with transformers' default, linear
// and YaRN frequency schedules. cos/sin are tabulated per position once, at construction.
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
  int half_ = 0;
  int max_positions_ = 0;
  std::vector<float> cos_, sin_;  // [max_positions][half]
};

}  // namespace dflash
