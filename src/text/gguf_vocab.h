// A GGUF's own tokenizer (tokenizer.ggml.*, as llama.cpp's converter writes it) in
// tokenizer.json's terms, so the one Tokenizer implementation serves both:
//   tokenizer.ggml.model       "gpt2" (byte-level BPE; the only kind supported)
//   tokenizer.ggml.tokens      every id's token, spelled in the byte-level alphabet
//   tokenizer.ggml.token_type  1 normal, 3 control (special added token), 4 user-defined
//                              (added token), 5 unused (padding ids: no token); 2 and 6 are
//                              not written for byte-level vocabularies and are rejected
//   tokenizer.ggml.merges      "left right" pairs in rank order
//   tokenizer.ggml.pre         the pre-tokenizer: "qwen2", "llama-bpe", or "gpt2"/"default"
//   tokenizer.ggml.{bos,eos,padding}_token_id, tokenizer.ggml.add_bos_token
#pragma once

#include <string>

#include "io/json_file.h"

namespace dflash::text {

// tokenizer.json's model / normalizer / pre_tokenizer / decoder / added_tokens for the GGUF
// metadata; throws Error naming `path` and the key at fault.
Json TokenizerJsonFromGguf(const Json& metadata, const std::string& path);

// The normalizer and pre_tokenizer objects that tokenizer.json spells for llama.cpp's
// pre-tokenizer name (the same regexes the models' own tokenizer.json files carry).
Json GgufPreTokenizer(const std::string& pre, const std::string& path);
Json GgufNormalizer(const std::string& pre);

}  // namespace dflash::text
