// tokenizer.json "pre_tokenizer": cuts text into the words that BPE sees. Supported: Split
// (regex or literal, every split behaviour, invert), ByteLevel (add_prefix_space, use_regex)
// and Sequence of those. Words stay raw bytes: the byte-level alphabet matters only to the
// vocabulary, which the BPE model converts once at load time, so ByteLevel must be last.
#pragma once

#include <string>
#include <vector>

#include "io/json_file.h"
#include "text/regex.h"

namespace dflash::text {

class PreTokenizer {
 public:
  PreTokenizer() = default;  // no pre-tokenizer: the whole text is one word
  static PreTokenizer FromJson(const Json& j, const std::string& where);

  // Replaces `words` by their pieces (empty pieces are dropped, as in the reference).
  void Apply(std::vector<std::string>& words) const;
  bool has_byte_level() const { return has_byte_level_; }

 private:
  enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };
  struct Step {
    bool byte_level = false;   // ByteLevel: optional prefix space, then the GPT-2 split
    bool add_prefix_space = false;
    std::vector<Regex> regex;  // zero or one: the Split pattern or ByteLevel's GPT-2 regex
    Behavior behavior = Behavior::kIsolated;
    bool invert = false;
  };
  void Add(const JsonObject& step);
  static void SplitWord(const Step& step, const std::string& word, std::vector<Match>& scratch,
                        std::vector<std::string>& out);

  std::vector<Step> steps_;
  bool has_byte_level_ = false;
};

}  // namespace dflash::text
