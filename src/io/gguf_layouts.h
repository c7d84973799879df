// What llama.cpp's convert_hf_to_gguf.py changes in a Qwen3.5 or Qwen3-MoE checkpoint beyond
// names, undone at load so that the models bind a GGUF exactly as they bind the Hugging Face
// safetensors it came from:
//  - qwen35 / qwen35moe: the (1 + w) RMSNorms (input, post-attention, final, q_norm, k_norm)
//    are stored with the 1 added (subtracted again: exact in f32 for |w| <= 1/2, Sterbenz);
//    the Gated DeltaNet value heads are reordered from grouped by key head to tiled
//    ([G0v0, G1v0, .., G0v1, ..], for ggml's broadcast) in in_proj_qkv's v rows, in_proj_z,
//    in_proj_a/b, A, dt_bias, conv1d's v channels and out_proj's columns (put back); conv1d is
//    squeezed to [channels][kernel] (given back its middle axis); A is stored as -exp(A_log)
//    and kept so (linear_attn.A, which the layer reads in place of A_log).
//  - qwen3moe / qwen35moe: the experts are stacked [E][rows][cols] per matrix; they become
//    per-expert views of the same bytes ("<mlp>.experts.<e>.<proj>.weight").
#pragma once

#include <string>

#include "io/json_file.h"
#include "io/tensor_store.h"

namespace dflash {

// `store` holds the GGUF's tensors under Hugging Face names (io/gguf.h); `metadata` its keys.
// Throws Error naming `path` and the GGUF tensor whose shape or presence is wrong.
void UndoLlamaCppLayouts(const Json& metadata, const std::string& path, TensorStore& store);

}  // namespace dflash
