// Text <-> token ids for byte-level BPE tokenizers in Hugging Face's tokenizer.json format
// (Qwen2/3/3.5, Llama 3, GPT-2 style), matching the `tokenizers` library id for id.
//
// Encode: validate UTF-8 -> cut out added tokens (raw ones, then normalize the rest, then
// normalized ones) -> pre-tokenize each remaining piece into words -> BPE each word.
// The post-processor (e.g. Llama 3's template that prepends <|begin_of_text|>) is not
// applied: callers build prompts with chat templates that spell out their special tokens.
// Decode: concatenate each token's bytes, then decode UTF-8 lossily (U+FFFD), as the
// reference's ByteLevel decoder does.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/added_tokens.h"
#include "text/bpe.h"
#include "text/normalizer.h"
#include "text/pretokenizer.h"

namespace dflash::text {

class Tokenizer {
 public:
  // Reads DIR/tokenizer.json and, when present, DIR/tokenizer_config.json (bos/eos/pad
  // names, add_bos_token). Throws Error naming the file and field on anything malformed
  // or unsupported.
  static Tokenizer Load(const std::string& dir);
  // The same from tokenizer.json already parsed; `where` names it in errors.
  static Tokenizer FromJson(const Json& tokenizer_json, const std::string& where);
  // From a GGUF's tokenizer.ggml.* metadata (text/gguf_vocab.h), with its bos/eos/pad ids
  // and add_bos_token; `path` names the file in errors.
  static Tokenizer FromGguf(const Json& metadata, const std::string& path);

  // Throws Error if `text` is not valid UTF-8 (naming the offset): there is no faithful
  // way to tokenize it, and the reference cannot even be handed such text.
  // parse_special=false treats special tokens' text as plain text (non-special added
  // tokens still match), like the reference's encode_special_tokens.
  std::vector<int32_t> Encode(std::string_view text, bool parse_special = true) const;

  // Ill-formed byte sequences come out as U+FFFD. Throws Error on an id that is not a token.
  std::string Decode(std::span<const int32_t> ids, bool skip_special = false) const;

  // The raw bytes of one token (possibly part of a character). Throws on unknown ids.
  const std::string& TokenBytes(int32_t id) const;
  bool IsSpecial(int32_t id) const;
  // By tokenizer.json spelling: added token content or the byte-level vocabulary string.
  std::optional<int32_t> FindToken(std::string_view token) const;
  int32_t TokenId(std::string_view token) const;  // throws Error when absent

  int32_t vocab_size() const { return static_cast<int32_t>(tokens_.size()); }
  int32_t bos_id() const { return bos_id_; }  // -1 when the tokenizer has none
  int32_t eos_id() const { return eos_id_; }
  int32_t pad_id() const { return pad_id_; }
  bool add_bos() const { return add_bos_; }  // tokenizer_config.json add_bos_token

 private:
  struct Token {
    std::string bytes;
    bool assigned = false;
    bool special = false;
  };
  // Text between raw added tokens: normalize, cut out normalized added tokens, BPE the rest.
  void EncodePlain(std::string_view piece, bool parse_special, std::vector<int32_t>& ids) const;
  void ReadConfig(const std::string& path);

  Normalizer normalizer_;
  PreTokenizer pre_tokenizer_;
  AddedTokens added_;
  BpeModel bpe_;
  std::vector<Token> tokens_;  // by id; ids never assigned stay unassigned
  std::unordered_map<std::string, int32_t> added_by_content_;
  int32_t bos_id_ = -1, eos_id_ = -1, pad_id_ = -1;
  bool add_bos_ = false;
};

// Detokenizes a growing sequence without ever emitting part of a character: a token that
// ends inside a multibyte character is held back until the next token completes it.
// Concatenating every Push() and the final Flush() gives exactly Decode(all ids).
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer, bool skip_special = false)
      : tokenizer_(&tokenizer), skip_special_(skip_special) {}
  std::string Push(int32_t id);  // the text that is now complete (often empty)
  std::string Flush();           // whatever is held back, with U+FFFD for a cut character

 private:
  const Tokenizer* tokenizer_;
  bool skip_special_;
  std::string pending_;
};

}  // namespace dflash::text
