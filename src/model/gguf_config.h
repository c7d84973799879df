// Model configurations from a llama.cpp GGUF's metadata: translated to config.json's terms and
// validated by the same parser as Hugging Face checkpoints (model/config.h).
#pragma once

#include <string>

#include "io/gguf.h"
#include "model/config.h"

namespace dflash {

// A Qwen3 target's hyper-parameters from qwen3.* metadata; the vocabulary size, tied
// embeddings and attention biases are read off the tensors.
TargetConfig TargetConfigFromGguf(const GgufModel& model, const std::string& path);

// A DFlash draft's configuration from ARCH.* metadata, as llama.cpp's converter writes it
// (ARCH.target_layers, ARCH.block_size, tokenizer.ggml.mask_token_id) or as earlier writers
// did (ARCH.dflash.*).
DraftConfig DraftConfigFromGguf(const GgufModel& model, const std::string& path);

}  // namespace dflash
