// What `dflash doctor` learns about a model without loading its weights: config.json and the
// safetensors headers (the files are mapped, their data never read), or a GGUF's metadata and
// tensor table. Says whether the engine will load it and how many bytes its weights take.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "model/config.h"
#include "plan/registry.h"

namespace dflash::plan {

struct ModelFiles {
  std::string path;
  std::string kind;          // "hf" (config.json + safetensors) | "gguf"
  std::string architecture;  // config.json architectures[0], or GGUF general.architecture
  bool loads = false;        // the engine supports this architecture in this role
  std::string why_not;       // when !loads: the parser's own message
  int tensors = 0;
  int64_t weight_bytes = 0;                  // as stored
  std::map<std::string, int64_t> dtype_bytes;  // weight bytes by stored dtype
  std::optional<TargetConfig> target;        // parsed config when it loads as a target
  std::optional<DraftConfig> draft;          // ... as a draft
};

// Throws Error naming the path when it does not exist or is neither a model directory nor a
// .gguf file, or when a header is malformed. An unsupported architecture is not an error:
// it comes back with loads = false and the reason.
ModelFiles InspectTarget(const std::string& path);
ModelFiles InspectDraft(const std::string& path);

// The registry pair whose target has this shape (hidden size, layers, heads, vocabulary), or
// nullptr: how doctor names the published draft for a local model directory.
const PairEntry* PairForTarget(const Registry& registry, const ModelShape& shape);

}  // namespace dflash::plan
