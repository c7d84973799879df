#include "text/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/error.h"

namespace dflash::text {

namespace {

// Unicode White_Space, the set Oniguruma's \s matches, as class members.
constexpr char kWhiteSpace[] =
    "\\t-\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";

std::string Pcre2Message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof(buf));
  return reinterpret_cast<const char*>(buf);
}

}  // namespace

std::string TranslateOnigurumaPattern(const std::string& pattern) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char n = pattern[++i];
      if (n == 's') {
        out += in_class ? std::string(kWhiteSpace) : "[" + std::string(kWhiteSpace) + "]";
      } else if (n == 'S') {
        // A negated set cannot be a member of a class; no tokenizer we know needs it.
        if (in_class) Fail("regex '", pattern, "': \\S inside a character class is not supported");
        out += "[^" + std::string(kWhiteSpace) + "]";
      } else {
        out += c;
        out += n;
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' (or '^]') right after the opening bracket is a member, not the end.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
      continue;
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

struct Regex::Code {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Code() { pcre2_code_free(code); }
};

Regex::Regex(const std::string& pattern, bool literal, const std::string& where) : where_(where) {
  const std::string translated = literal ? pattern : TranslateOnigurumaPattern(pattern);
  // PCRE2_LITERAL admits UTF but not UCP (a literal has no classes for UCP to change).
  const uint32_t options = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
  int error = 0;
  PCRE2_SIZE offset = 0;
  auto code = std::make_shared<Code>();
  code->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                             options, &error, &offset, nullptr);
  if (code->code == nullptr) {
    Fail(where, ": regex '", pattern, "' does not compile at offset ", offset, ": ",
         Pcre2Message(error));
  }
  // JIT is an optimisation: where it is unavailable the interpreter gives the same matches.
  code->jit = pcre2_jit_compile(code->code, PCRE2_JIT_COMPLETE) == 0;
  code_ = std::move(code);
}

void Regex::FindAll(std::string_view subject, std::vector<Match>& out) const {
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> md(
      pcre2_match_data_create_from_pattern(code_->code, nullptr), &pcre2_match_data_free);
  if (!md) Fail(where_, ": out of memory for regex match data");
  const auto* data = reinterpret_cast<PCRE2_SPTR>(subject.data());
  size_t start = 0;
  size_t last_end = std::string_view::npos;
  while (start <= subject.size()) {
    int rc = pcre2_match(code_->code, data, subject.size(), start, PCRE2_NO_UTF_CHECK, md.get(),
                         nullptr);
    // The JIT's fixed stack can run out on long inputs; the interpreter's heap frames
    // go much further, so retry there before giving up.
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      rc = pcre2_match(code_->code, data, subject.size(), start, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT,
                       md.get(), nullptr);
    }
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) Fail(where_, ": regex matching failed at byte ", start, ": ", Pcre2Message(rc));
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
    const size_t b = ov[0], e = ov[1];
    if (b == e && e == last_end) {
      // Step over one character, as Oniguruma's iterator does.
      if (start >= subject.size()) break;
      ++start;
      while (start < subject.size() && (static_cast<unsigned char>(subject[start]) & 0xC0) == 0x80) {
        ++start;
      }
      continue;
    }
    out.push_back({b, e});
    start = e;
    last_end = e;
  }
}

}  // namespace dflash::text
