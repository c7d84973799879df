// Kernel paths switched for the length of a scope, so one test runs both sides of a run-time
// choice on a CPU that has them, and restores the choice it found.
#pragma once

#include "ops/amx.h"
#include "ops/ops.h"

namespace dflash::testing {

struct AmxScope {
  explicit AmxScope(bool allowed) : before(ops::AmxAllowed()) { ops::SetAmxAllowed(allowed); }
  ~AmxScope() { ops::SetAmxAllowed(before); }
  bool before;
};

// bf16 dot products for bf16 KV caches (ops.h: Bf16DotActive).
struct Bf16DotScope {
  explicit Bf16DotScope(bool allowed) : before(ops::Bf16DotAllowed()) { ops::SetBf16DotAllowed(allowed); }
  ~Bf16DotScope() { ops::SetBf16DotAllowed(before); }
  bool before;
};

}  // namespace dflash::testing
