#include "text/added_tokens.h"

#include <algorithm>
#include <unicode/uchar.h>

#include "text/utf8.h"

namespace dflash::text {

namespace {

// What the reference's regexes call \w and \s (Unicode word characters and White_Space).
bool IsWordChar(char32_t c) {
  if (u_hasBinaryProperty(c, UCHAR_ALPHABETIC) || u_hasBinaryProperty(c, UCHAR_JOIN_CONTROL)) {
    return true;
  }
  switch (u_charType(c)) {
    case U_NON_SPACING_MARK:
    case U_ENCLOSING_MARK:
    case U_COMBINING_SPACING_MARK:
    case U_DECIMAL_DIGIT_NUMBER:
    case U_CONNECTOR_PUNCTUATION:
      return true;
    default:
      return false;
  }
}

bool IsSpace(char32_t c) { return u_hasBinaryProperty(c, UCHAR_WHITE_SPACE); }

// Start of the character that ends at byte `end` (exclusive) of valid UTF-8.
size_t PreviousCharStart(std::string_view s, size_t end) {
  size_t i = end - 1;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
  return i;
}

char32_t CharBefore(std::string_view s, size_t end) {
  size_t i = PreviousCharStart(s, end);
  return NextCodePoint(s, i);
}

char32_t CharAt(std::string_view s, size_t begin) { return NextCodePoint(s, begin); }

}  // namespace

AddedTokens AddedTokens::FromJson(const Json& list, const Normalizer& normalizer,
                                  const std::string& where) {
  AddedTokens a;
  if (list.is_null()) return a;
  if (!list.is_array()) Fail(where, ": field 'added_tokens' is not an array");
  for (size_t i = 0; i < list.size(); ++i) {
    const JsonObject t(list[i], where + ": added_tokens[" + std::to_string(i) + "]");
    AddedToken tok;
    const auto id = t.Get<int64_t>("id");
    if (id < 0 || id > INT32_MAX) Fail(t.where(), ": field 'id' = ", id, " is out of range");
    tok.id = static_cast<int32_t>(id);
    tok.content = t.Get<std::string>("content");
    tok.special = t.Get<bool>("special", false);
    tok.lstrip = t.Get<bool>("lstrip", false);
    tok.rstrip = t.Get<bool>("rstrip", false);
    tok.single_word = t.Get<bool>("single_word", false);
    tok.normalized = t.Get<bool>("normalized", !tok.special);
    if (tok.content.empty()) continue;  // the reference ignores empty tokens too
    if (FindInvalidUtf8(tok.content) != kValidUtf8) Fail(t.where(), ": 'content' is not valid UTF-8");
    const int cls = tok.normalized ? 1 : 0;
    std::string pattern = tok.normalized ? normalizer.Apply(tok.content) : tok.content;
    if (!pattern.empty()) {
      a.by_first_byte_[cls][static_cast<unsigned char>(pattern[0])].push_back(
          {std::move(pattern), static_cast<int>(a.tokens_.size())});
      a.any_[cls] = true;
    }
    a.tokens_.push_back(std::move(tok));
  }
  for (Index& cls : a.by_first_byte_) {
    for (std::vector<Pattern>& patterns : cls) {
      // Longest first; equal lengths keep file order, which is the reference's tie-break.
      std::stable_sort(patterns.begin(), patterns.end(), [](const Pattern& x, const Pattern& y) {
        return x.text.size() > y.text.size();
      });
    }
  }
  return a;
}

void AddedTokens::Split(std::string_view text, bool normalized_class, bool parse_special,
                        std::vector<TextSpan>& out) const {
  const int cls = normalized_class ? 1 : 0;
  const Index& index = by_first_byte_[cls];
  size_t start_offset = 0;  // end of the last emitted token
  size_t scan = 0;          // matches never overlap, even ones that get discarded
  while (any_[cls] && scan < text.size()) {
    const Pattern* hit = nullptr;
    for (const Pattern& p : index[static_cast<unsigned char>(text[scan])]) {
      if (text.compare(scan, p.text.size(), p.text) == 0) {
        hit = &p;
        break;
      }
    }
    if (hit == nullptr) {
      ++scan;
      continue;
    }
    size_t start = scan, stop = scan + hit->text.size();
    scan = stop;
    const AddedToken& tok = tokens_[hit->index];
    if (tok.special && !parse_special) continue;
    if (tok.single_word) {
      const bool word_before = start > 0 && IsWordChar(CharBefore(text, start));
      const bool word_after = stop < text.size() && IsWordChar(CharAt(text, stop));
      if (word_before || word_after) continue;
    }
    if (tok.lstrip) {
      size_t s = start;
      while (s > start_offset && IsSpace(CharBefore(text, s))) s = PreviousCharStart(text, s);
      start = s;
    }
    if (tok.rstrip) {
      while (stop < text.size()) {
        size_t next = stop;
        if (!IsSpace(NextCodePoint(text, next))) break;
        stop = next;
      }
      scan = std::max(scan, stop);
    }
    if (start_offset < start) out.push_back({-1, start_offset, start});
    out.push_back({tok.id, start, stop});
    start_offset = stop;
  }
  if (start_offset < text.size()) out.push_back({-1, start_offset, text.size()});
}

}  // namespace dflash::text
