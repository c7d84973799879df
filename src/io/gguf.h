// GGUF (llama.cpp's model file, versions 2 and 3): a header, metadata key/values, tensor infos,
// then the tensor data, each tensor at an offset aligned to general.alignment (default 32).
// All integers little-endian; strings are a u64 length and bytes.
//
// Tensors are mapped in place (mmap; block-quantised matrices are packed into copies before use,
// see PackMatrices) under Hugging Face names (DFlash drafts: z-lab's names) (token_embd.weight ->
// model.embed_tokens.weight, blk.N.attn_q.weight -> model.layers.N.self_attn.q_proj.weight,
// ...), so the Qwen3 model binds them as it binds safetensors. GGUF lists dimensions
// innermost first; the store keeps ours, outermost first.
#pragma once

#include <string>

#include "io/json_file.h"
#include "io/tensor_store.h"

namespace dflash {

struct GgufModel {
  Json metadata;  // every key; arrays as JSON arrays, integers and floats as JSON numbers
  TensorStore store{""};
};

// Reads and validates `path` (sizes, counts, offsets, alignment, types) and maps tensor names.
// Throws Error naming the file and the key or tensor at fault.
GgufModel LoadGguf(const std::string& path);

// The Hugging Face name of a llama.cpp tensor name; "" when it has none (e.g. rope_freqs).
std::string HfTensorName(const std::string& gguf_name);
// The same for a DFlash draft (z-lab's names: fc, hidden_norm, norm, layers.N.*); "" for the
// token_embd/output copies some converters add, since a draft uses its target's.
std::string DraftTensorName(const std::string& gguf_name);

// llama.cpp's architecture names for DFlash drafts: "dflash" (upstream) and "dflash-draft"
// (the earlier forks). Tensors are fc (or dflash_fc), enc.output_norm (or dflash_hidden_norm),
// output_norm and blk.N.* (post-attention norm as ffn_norm or post_attention_norm), for DFlash2
// also blk.N.{attn,ffn}_conv_{base,proj} and selector_{predecessor,successor,hidden}; the
// metadata keys are read by DraftConfigFromGguf (model/gguf_config.h).
bool IsDflashArchitecture(const std::string& arch);

inline bool IsGgufPath(const std::string& path) {
  return path.size() > 5 && path.compare(path.size() - 5, 5, ".gguf") == 0;
}

}  // namespace dflash
