// Acceptance profiles for scripted acceptance (spec/scripted_drafter.h): a JSON file with a
// per-depth curve, or a built-in named after its source in the registry (data/pairs.json):
// `agent` (the seed report's 2.3-3.0 tokens per cycle at 8.4k context, midpoint) and `code`,
// `math`, `chat` (z-lab's reported tau for Qwen3-8B), each as a geometric per-depth curve
// matched to its tau at the block.
#pragma once

#include <string>
#include <vector>

#include "plan/registry.h"
#include "spec/scripted_drafter.h"

namespace dflash::plan {

std::vector<std::string> BuiltinProfileNames();  // agent, code, math, chat

// `spec`: a built-in name, else a JSON file {"name": str, "source": str, "accept_at_depth":
// [p1, p2, ...]} (name defaults to the file's, source to its path). Throws Error naming the
// file and field, or listing the built-ins for an unknown name that is not a file either.
AcceptanceProfile LoadAcceptanceProfile(const std::string& spec, const Registry& registry, int block);

}  // namespace dflash::plan
