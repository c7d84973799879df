// Pre-tokenizer regexes, written for Oniguruma (what HF tokenizers runs), executed with
// PCRE2 in UTF + Unicode-property mode. The two dialects agree on everything these
// patterns use except \s: Oniguruma's is the Unicode White_Space property, PCRE2's also
// takes U+180E, so \s and \S are rewritten into explicit classes before compiling.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace dflash::text {

struct Match {
  size_t begin, end;  // byte offsets into the subject
};

class Regex {
 public:
  // Throws Error naming `where` and the pattern when it does not compile. `literal` treats
  // the pattern as a plain string (tokenizer.json's {"String": ...} patterns).
  Regex(const std::string& pattern, bool literal, const std::string& where);

  // Every match, left to right, with Oniguruma's find_iter rules for empty matches (one
  // is reported unless it sits right at the end of the previous match). The subject
  // must be valid UTF-8; it is not re-checked.
  void FindAll(std::string_view subject, std::vector<Match>& out) const;

 private:
  struct Code;
  std::shared_ptr<const Code> code_;  // compiled once; shared by copies
  std::string where_;
};

// The Oniguruma-to-PCRE2 rewrite described above; exposed for tests.
std::string TranslateOnigurumaPattern(const std::string& pattern);

}  // namespace dflash::text
