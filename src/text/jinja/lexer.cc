#include "text/jinja/lexer.h"

#include <cerrno>
#include <cstdlib>

#include "text/jinja/located_error.h"
#include "text/jinja/py_string.h"

namespace dflash::jinja {

namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsNameStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (static_cast<unsigned char>(c) & 0x80);
}
bool IsNameChar(char c) { return IsNameStart(c) || IsDigit(c); }

// jinja2 splits lines on \r\n, \r and \n only, joins them with \n, and drops one trailing newline.
std::string NormalizeNewlines(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\r') {
      out += '\n';
      if (i + 1 < s.size() && s[i + 1] == '\n') ++i;
    } else {
      out += s[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// Python's unicode-escape decoding, which jinja2 applies to string literals.
std::string Unescape(std::string_view body, int line) {
  std::string out;
  auto hex = [&](size_t& i, int digits) -> char32_t {
    if (i + digits > body.size()) FailAt(line, "truncated \\x/\\u escape in string literal");
    char32_t v = 0;
    for (int k = 0; k < digits; ++k) {
      const char c = body[i + k];
      int d = IsDigit(c) ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
      if (d < 0) FailAt(line, "truncated \\x/\\u escape in string literal");
      v = v * 16 + d;
    }
    i += digits;
    return v;
  };
  for (size_t i = 0; i < body.size();) {
    if (body[i] != '\\' || i + 1 >= body.size()) {
      out += body[i++];
      continue;
    }
    const char e = body[i + 1];
    i += 2;
    switch (e) {
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'v': out += '\v'; break;
      case '\n': break;  // line continuation
      case 'x': py::AppendUtf8(out, hex(i, 2)); break;
      case 'u': py::AppendUtf8(out, hex(i, 4)); break;
      case 'U': {
        const char32_t cp = hex(i, 8);
        if (cp > 0x10FFFF) FailAt(line, "\\U escape out of range in string literal");
        py::AppendUtf8(out, cp);
        break;
      }
      case 'N': FailAt(line, "\\N{...} escapes in string literals are not supported");
      default:
        if (e >= '0' && e <= '7') {
          char32_t v = e - '0';
          for (int k = 0; k < 2 && i < body.size() && body[i] >= '0' && body[i] <= '7'; ++k) v = v * 8 + (body[i++] - '0');
          py::AppendUtf8(out, v);
        } else if (static_cast<unsigned char>(e) & 0x80) {
          FailAt(line, "backslash before a non-ASCII character in a string literal is not supported");
        } else {
          out += '\\';
          out += e;
        }
    }
  }
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string src) : src_(std::move(src)) {}

  std::vector<Token> Run() {
    while (pos_ < src_.size()) {
      const size_t tag = FindTagStart(pos_);
      if (tag == std::string::npos) {
        Emit(Tok::kData, src_.substr(pos_), line_);
        Advance(src_.size() - pos_);
        break;
      }
      LexTag(tag);
    }
    out_.push_back({Tok::kEnd, "", line_});
    return std::move(out_);
  }

 private:
  size_t FindTagStart(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    }
    return std::string::npos;
  }

  bool At(size_t p, std::string_view s) const { return src_.compare(p, s.size(), s) == 0; }

  // Python whitespace at p (ASCII fast path); returns its byte length or 0.
  size_t SpaceAt(size_t p) const {
    if (p >= src_.size()) return 0;
    const unsigned char c = static_cast<unsigned char>(src_[p]);
    if (c < 0x80) return py::IsSpace(c) ? 1 : 0;
    const size_t n = (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : 4;
    const std::u32string cp = py::Decode(std::string_view(src_).substr(p, n));
    return cp.size() == 1 && py::IsSpace(cp[0]) ? n : 0;
  }
  size_t SkipSpace(size_t p) const {
    for (size_t n; (n = SpaceAt(p)) != 0;) p += n;
    return p;
  }

  void Advance(size_t n) {
    for (size_t i = 0; i < n; ++i) line_ += src_[pos_ + i] == '\n';
    pos_ += n;
  }

  void Emit(Tok type, std::string text, int line) {
    if (type == Tok::kData && text.empty()) return;
    out_.push_back({type, std::move(text), line});
  }

  // Emits the text before a tag with the tag's whitespace control applied to it.
  void EmitLeadingText(size_t tag, char kind, char sign) {
    std::string text = src_.substr(pos_, tag - pos_);
    if (sign == '-') {
      text = py::Strip(text, std::nullopt, false, true);
    } else if (sign != '+' && kind != '{') {
      // lstrip_blocks: drop the indentation between the last newline and a block/comment tag.
      const size_t l_pos = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
      if (l_pos > 0 || line_starting_) {
        const std::string rest = text.substr(l_pos);
        if (!rest.empty() && py::Strip(rest, std::nullopt, true, true).empty()) text.resize(l_pos);
      }
    }
    Emit(Tok::kData, std::move(text), line_);
    Advance(tag - pos_);
  }

  void LexTag(size_t tag) {
    const char kind = src_[tag + 1];
    size_t after = tag + 2;
    char sign = 0;
    if (after < src_.size() && (src_[after] == '-' || src_[after] == '+')) sign = src_[after++];
    if (kind == '%') {
      size_t k = SkipSpace(after);
      if (At(k, "raw")) {
        k = SkipSpace(k + 3);
        if (At(k, "-%}") || At(k, "%}")) {
          const bool strip = At(k, "-%}");
          EmitLeadingText(tag, kind, sign);
          const int line = line_;
          size_t end = k + (strip ? 3 : 2);
          if (strip) end = SkipSpace(end);
          line_starting_ = end > 0 && src_[end - 1] == '\n';
          Advance(end - pos_);
          LexRawBody(line);
          return;
        }
      }
    }
    EmitLeadingText(tag, kind, sign);
    const int line = line_;
    Advance(after - pos_);
    line_starting_ = false;
    if (kind == '#') {
      LexCommentBody(line);
    } else {
      Emit(kind == '{' ? Tok::kVariableBegin : Tok::kBlockBegin, "", line);
      LexInside(kind == '%', line);
    }
  }

  void LexCommentBody(int open_line) {
    const size_t close = src_.find("#}", pos_);
    if (close == std::string::npos) FailAt(open_line, "missing end of comment tag");
    size_t end = close + 2;
    const char sign = close > pos_ ? src_[close - 1] : 0;
    if (sign == '-') end = SkipSpace(end);
    else if (sign != '+' && end < src_.size() && src_[end] == '\n') ++end;  // trim_blocks
    line_starting_ = src_[end - 1] == '\n';
    Advance(end - pos_);
  }

  void LexRawBody(int open_line) {
    for (size_t p = src_.find("{%", pos_); p != std::string::npos; p = src_.find("{%", p + 1)) {
      size_t k = p + 2;
      char sign = 0;
      if (k < src_.size() && (src_[k] == '-' || src_[k] == '+')) sign = src_[k++];
      k = SkipSpace(k);
      if (!At(k, "endraw")) continue;
      k = SkipSpace(k + 6);
      size_t end;
      if (At(k, "+%}")) end = k + 3;
      else if (At(k, "-%}")) end = SkipSpace(k + 3);
      else if (At(k, "%}")) end = k + 2 + (k + 2 < src_.size() && src_[k + 2] == '\n');
      else continue;
      EmitLeadingText(p, '%', sign);
      line_starting_ = src_[end - 1] == '\n';
      Advance(end - pos_);
      return;
    }
    FailAt(open_line, "missing end of raw directive ({% endraw %})");
  }

  // Tokens inside {{ ... }} or {% ... %}, up to and including the closing tag.
  void LexInside(bool block, int open_line) {
    std::string brackets;  // expected closers, innermost last
    while (true) {
      if (pos_ >= src_.size()) {
        FailAt(open_line, "unexpected end of template: '", block ? "{%" : "{{", "' opened on line ", open_line,
               " is never closed");
      }
      if (brackets.empty() && LexEndTag(block)) return;
      if (const size_t ws = SpaceAt(pos_)) {
        Advance(ws);
        continue;
      }
      const char c = src_[pos_];
      if (IsDigit(c)) {
        LexNumber();
      } else if (IsNameStart(c)) {
        size_t e = pos_;
        while (e < src_.size() && IsNameChar(src_[e])) ++e;
        Emit(Tok::kName, src_.substr(pos_, e - pos_), line_);
        Advance(e - pos_);
      } else if (c == '\'' || c == '"') {
        LexString(c);
      } else {
        LexOperator(brackets);
      }
    }
  }

  bool LexEndTag(bool block) {
    size_t end = 0;
    if (block) {
      if (At(pos_, "+%}")) end = pos_ + 3;
      else if (At(pos_, "-%}")) end = SkipSpace(pos_ + 3);
      else if (At(pos_, "%}")) end = pos_ + 2 + (pos_ + 2 < src_.size() && src_[pos_ + 2] == '\n');
    } else {
      if (At(pos_, "-}}")) end = SkipSpace(pos_ + 3);
      else if (At(pos_, "}}")) end = pos_ + 2;
    }
    if (end == 0) return false;
    Emit(block ? Tok::kBlockEnd : Tok::kVariableEnd, "", line_);
    line_starting_ = src_[end - 1] == '\n';
    Advance(end - pos_);
    return true;
  }

  // Digits with single underscores between them: (\d+_)*\d+
  size_t ScanDigits(size_t p) const {
    if (p >= src_.size() || !IsDigit(src_[p])) return std::string::npos;
    while (true) {
      while (p < src_.size() && IsDigit(src_[p])) ++p;
      if (p + 1 < src_.size() && src_[p] == '_' && IsDigit(src_[p + 1])) {
        ++p;
        continue;
      }
      return p;
    }
  }

  void LexNumber() {
    const int line = line_;
    const size_t start = pos_;
    const size_t int_end = ScanDigits(start);
    // Float: D(.D)?e[+-]?D | D.D   (not directly after a '.', like jinja2's lookbehind)
    size_t float_end = std::string::npos;
    if (start == 0 || src_[start - 1] != '.') {
      size_t p = int_end;
      if (p < src_.size() && src_[p] == '.') {
        const size_t frac = ScanDigits(p + 1);
        if (frac != std::string::npos) p = frac;
      }
      if (p < src_.size() && (src_[p] == 'e' || src_[p] == 'E')) {
        size_t q = p + 1;
        if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
        const size_t exp = ScanDigits(q);
        if (exp != std::string::npos) float_end = exp;
      }
      if (float_end == std::string::npos && int_end < src_.size() && src_[int_end] == '.') {
        const size_t frac = ScanDigits(int_end + 1);
        if (frac != std::string::npos) float_end = frac;
      }
    }
    auto clean = [&](size_t b, size_t e) {
      std::string s;
      for (size_t i = b; i < e; ++i) {
        if (src_[i] != '_') s += src_[i];
      }
      return s;
    };
    if (float_end != std::string::npos) {
      const std::string text = clean(start, float_end);
      Token t{Tok::kFloat, text, line};
      t.float_value = std::strtod(text.c_str(), nullptr);
      out_.push_back(t);
      Advance(float_end - start);
      return;
    }
    // Integer: 0b/0o/0x prefixes, [1-9](_?\d)*, or 0(_?0)*
    int base = 10;
    size_t digits_from = start, end = start;
    const char p1 = start + 1 < src_.size() ? (src_[start + 1] | 0x20) : 0;
    auto scan_base = [&](int b) {
      size_t p = start + 2;
      auto ok = [b](char c) {
        c |= 0x20;
        return b == 2 ? (c == '0' || c == '1') : b == 8 ? (c >= '0' && c <= '7') : (IsDigit(c) || (c >= 'a' && c <= 'f'));
      };
      while (p < src_.size()) {
        if (ok(src_[p])) ++p;
        else if (src_[p] == '_' && p + 1 < src_.size() && ok(src_[p + 1])) p += 2;
        else break;
      }
      return p;
    };
    if (src_[start] == '0' && (p1 == 'b' || p1 == 'o' || p1 == 'x')) {
      base = p1 == 'b' ? 2 : p1 == 'o' ? 8 : 16;
      end = scan_base(base);
      if (end == start + 2) {  // a bare "0" followed by a letter
        end = start + 1;
        base = 10;
      } else {
        digits_from = start + 2;
      }
    }
    if (base == 10) {
      if (src_[start] == '0') {
        end = start + 1;
        while (end < src_.size() && (src_[end] == '0' || (src_[end] == '_' && end + 1 < src_.size() && src_[end + 1] == '0'))) ++end;
      } else {
        end = int_end;
      }
    }
    const std::string text = clean(digits_from, end);
    errno = 0;
    char* stop = nullptr;
    const long long v = std::strtoll(text.c_str(), &stop, base);
    if (errno == ERANGE) FailAt(line, "integer literal ", src_.substr(start, end - start), " is too large");
    Token t{Tok::kInteger, src_.substr(start, end - start), line};
    t.int_value = v;
    out_.push_back(t);
    Advance(end - start);
  }

  void LexString(char quote) {
    const int line = line_;
    size_t p = pos_ + 1;
    while (p < src_.size() && src_[p] != quote) p += src_[p] == '\\' ? 2 : 1;
    if (p >= src_.size()) FailAt(line, "unterminated string literal");
    Emit(Tok::kString, Unescape(std::string_view(src_).substr(pos_ + 1, p - pos_ - 1), line), line);
    Advance(p + 1 - pos_);
  }

  void LexOperator(std::string& brackets) {
    static const char* const kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
    for (const char* op : kTwo) {
      if (At(pos_, op)) {
        Emit(Tok::kOperator, op, line_);
        Advance(2);
        return;
      }
    }
    const char c = src_[pos_];
    if (std::string_view("+-/*%~[](){}><=.:|,;").find(c) == std::string_view::npos) {
      FailAt(line_, "unexpected char '", std::string(1, c), "'");
    }
    if (c == '(' || c == '[' || c == '{') {
      brackets += c == '(' ? ')' : c == '[' ? ']' : '}';
    } else if (c == ')' || c == ']' || c == '}') {
      if (brackets.empty()) FailAt(line_, "unexpected '", std::string(1, c), "'");
      if (brackets.back() != c) FailAt(line_, "unexpected '", std::string(1, c), "', expected '", std::string(1, brackets.back()), "'");
      brackets.pop_back();
    }
    Emit(Tok::kOperator, std::string(1, c), line_);
    Advance(1);
  }

  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> out_;
};

}  // namespace

std::vector<Token> Tokenize(std::string_view source) {
  if (!py::IsValidUtf8(source)) FailAt(1, "template source is not valid UTF-8");
  return Lexer(NormalizeNewlines(source)).Run();
}

}  // namespace dflash::jinja
