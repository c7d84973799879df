// Added tokens (tokenizer.json "added_tokens"): strings such as <|im_end|> that are found in
// the text before anything else runs and become one id each, honouring their flags:
//   special     - skipped by Decode(skip_special) and not matched when parse_special is off
//   lstrip/rstrip - the match also swallows the whitespace to its left / right
//   single_word - only matches when not inside a word
//   normalized  - matched in the normalized text rather than the raw text
// Matching is leftmost-longest, like the reference's Aho-Corasick automaton.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "io/json_file.h"
#include "text/normalizer.h"

namespace dflash::text {

struct AddedToken {
  int32_t id;
  std::string content;
  bool special, lstrip, rstrip, single_word, normalized;
};

// A piece of text: either an added token's id or a span left for the model.
struct TextSpan {
  int32_t token;  // -1: plain text in [begin, end)
  size_t begin, end;
};

class AddedTokens {
 public:
  AddedTokens() = default;
  // `normalizer` rewrites the content of normalized tokens, as it rewrites the text.
  static AddedTokens FromJson(const Json& list, const Normalizer& normalizer, const std::string& where);

  // Splits `text` on the tokens of one class: raw (normalized=false) or normalized ones.
  // Special tokens are ignored when !parse_special.
  void Split(std::string_view text, bool normalized_class, bool parse_special,
             std::vector<TextSpan>& out) const;

  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  struct Pattern {
    std::string text;  // content, normalized for normalized tokens
    int index;         // into tokens_
  };
  std::vector<AddedToken> tokens_;
  // Patterns of each class by first byte, longest first, so the first hit is the longest.
  using Index = std::array<std::vector<Pattern>, 256>;
  Index by_first_byte_[2];  // [raw, normalized]
  bool any_[2] = {false, false};
};

}  // namespace dflash::text
