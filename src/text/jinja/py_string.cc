#include "text/jinja/py_string.h"

#include <locale.h>
#include <wctype.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "core/error.h"

namespace dflash::jinja::py {

namespace {

// glibc's C.UTF-8 locale carries the Unicode simple case mappings and character classes.
locale_t Utf8Locale() {
  static const locale_t loc = [] {
    locale_t l = newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(0));
    if (l == static_cast<locale_t>(0)) l = newlocale(LC_CTYPE_MASK, "C.utf8", static_cast<locale_t>(0));
    return l;
  }();
  return loc;
}

char32_t ToUpper(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') ? c - 32 : c;
  const locale_t loc = Utf8Locale();
  if (loc == static_cast<locale_t>(0)) Fail("upper(): no UTF-8 locale for non-ASCII text");
  return static_cast<char32_t>(towupper_l(static_cast<wint_t>(c), loc));
}

char32_t ToLower(char32_t c) {
  if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
  const locale_t loc = Utf8Locale();
  if (loc == static_cast<locale_t>(0)) Fail("lower(): no UTF-8 locale for non-ASCII text");
  return static_cast<char32_t>(towlower_l(static_cast<wint_t>(c), loc));
}

bool IsAlpha(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  const locale_t loc = Utf8Locale();
  return loc != static_cast<locale_t>(0) && iswalpha_l(static_cast<wint_t>(c), loc);
}

// Python's upper() of characters that become several code points (SpecialCasing.txt);
// nullptr if the character has no such mapping.
const char32_t* UpperSpecial(char32_t c) {
  static const struct {
    char32_t from;
    char32_t to[4];
  } kTable[] = {
      {0x00DF, {'S', 'S'}},          {0x0149, {0x02BC, 'N'}},         {0x01F0, {'J', 0x030C}},
      {0x0390, {0x0399, 0x0308, 0x0301}}, {0x03B0, {0x03A5, 0x0308, 0x0301}}, {0x0587, {0x0535, 0x0552}},
      {0x1E96, {'H', 0x0331}},       {0x1E97, {'T', 0x0308}},         {0x1E98, {'W', 0x030A}},
      {0x1E99, {'Y', 0x030A}},       {0x1E9A, {'A', 0x02BE}},         {0xFB00, {'F', 'F'}},
      {0xFB01, {'F', 'I'}},          {0xFB02, {'F', 'L'}},            {0xFB03, {'F', 'F', 'I'}},
      {0xFB04, {'F', 'F', 'L'}},     {0xFB05, {'S', 'T'}},            {0xFB06, {'S', 'T'}},
      {0xFB13, {0x0544, 0x0546}},    {0xFB14, {0x0544, 0x0535}},      {0xFB15, {0x0544, 0x053B}},
      {0xFB16, {0x054E, 0x0546}},    {0xFB17, {0x0544, 0x053D}},
  };
  for (const auto& e : kTable) {
    if (e.from == c) return e.to;
  }
  return nullptr;
}

// Polytonic Greek with iota subscripts and breathings: Python's upper() expands these through
// SpecialCasing rules we do not carry.
bool UpperIsUnsupported(char32_t c) {
  static const char32_t kRanges[][2] = {
      {0x1F50, 0x1F50}, {0x1F52, 0x1F52}, {0x1F54, 0x1F54}, {0x1F56, 0x1F56}, {0x1F80, 0x1FAF},
      {0x1FB2, 0x1FB4}, {0x1FB6, 0x1FB7}, {0x1FBC, 0x1FBC}, {0x1FC2, 0x1FC4}, {0x1FC6, 0x1FC7},
      {0x1FCC, 0x1FCC}, {0x1FD2, 0x1FD3}, {0x1FD6, 0x1FD7}, {0x1FE2, 0x1FE4}, {0x1FE6, 0x1FE7},
      {0x1FF2, 0x1FF4}, {0x1FF6, 0x1FF7}, {0x1FFC, 0x1FFC}};
  for (const auto& r : kRanges) {
    if (c >= r[0] && c <= r[1]) return true;
  }
  return false;
}

// Title-case digraphs: Python's capitalize() maps them to a title-case form towupper lacks.
bool IsTitleDigraph(char32_t c) { return (c >= 0x01C4 && c <= 0x01CC) || (c >= 0x01F1 && c <= 0x01F3); }

std::string HexEscape(char32_t c) {
  char buf[16];
  if (c < 0x100) std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
  else if (c < 0x10000) std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
  else std::snprintf(buf, sizeof buf, "\\U%08x", static_cast<unsigned>(c));
  return buf;
}

// str.isprintable(): false for controls, separators other than ' ', format characters,
// private use and unassigned code points.
bool IsPrintable(char32_t c) {
  if (c < 0x20 || c == 0x7F) return false;
  if (c < 0x7F) return true;
  if (c >= 0x80 && c <= 0xA0) return false;
  static const char32_t kNot[][2] = {
      {0x00AD, 0x00AD}, {0x0600, 0x0605}, {0x061C, 0x061C}, {0x06DD, 0x06DD}, {0x070F, 0x070F},
      {0x0890, 0x0891}, {0x08E2, 0x08E2}, {0x1680, 0x1680}, {0x180E, 0x180E}, {0x2000, 0x200F},
      {0x2028, 0x202F}, {0x205F, 0x2064}, {0x2066, 0x206F}, {0x3000, 0x3000}, {0xD800, 0xF8FF},
      {0xFEFF, 0xFEFF}, {0xFFF9, 0xFFFB}, {0x110BD, 0x110BD}, {0x110CD, 0x110CD},
      {0x13430, 0x1343F}, {0x1BCA0, 0x1BCA3}, {0x1D173, 0x1D17A}, {0xE0001, 0xE0001},
      {0xE0020, 0xE007F}, {0xF0000, 0x10FFFF}};
  for (const auto& r : kNot) {
    if (c >= r[0] && c <= r[1]) return false;
  }
  const locale_t loc = Utf8Locale();
  return loc == static_cast<locale_t>(0) || iswprint_l(static_cast<wint_t>(c), loc);
}

bool InChars(char32_t c, const std::u32string& chars) { return chars.find(c) != std::u32string::npos; }

}  // namespace

std::u32string Decode(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const unsigned char b = static_cast<unsigned char>(s[i]);
    int n = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > s.size()) {  // not reachable for checked input; keep the byte
      out.push_back(b);
      ++i;
      continue;
    }
    char32_t cp = n == 1 ? b : n == 2 ? (b & 0x1F) : n == 3 ? (b & 0x0F) : (b & 0x07);
    for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    out.push_back(cp);
    i += n;
  }
  return out;
}

std::string Encode(std::u32string_view cps) {
  std::string out;
  out.reserve(cps.size());
  for (char32_t c : cps) AppendUtf8(out, c);
  return out;
}

bool IsValidUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char b = static_cast<unsigned char>(s[i]);
    int n;
    char32_t min;
    if (b < 0x80) { ++i; continue; }
    if ((b >> 5) == 0x6) { n = 2; min = 0x80; }
    else if ((b >> 4) == 0xE) { n = 3; min = 0x800; }
    else if ((b >> 3) == 0x1E) { n = 4; min = 0x10000; }
    else return false;
    if (i + n > s.size()) return false;
    char32_t cp = n == 2 ? (b & 0x1F) : n == 3 ? (b & 0x0F) : (b & 0x07);
    for (int k = 1; k < n; ++k) {
      const unsigned char c = static_cast<unsigned char>(s[i + k]);
      if ((c >> 6) != 0x2) return false;
      cp = (cp << 6) | (c & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n;
  }
  return true;
}

size_t Length(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

bool IsSpace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

std::string Strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right) {
  const std::u32string cps = Decode(s);
  const std::u32string set = chars ? Decode(*chars) : std::u32string();
  auto strip = [&](char32_t c) { return chars ? InChars(c, set) : IsSpace(c); };
  size_t b = 0, e = cps.size();
  if (left) while (b < e && strip(cps[b])) ++b;
  if (right) while (e > b && strip(cps[e - 1])) --e;
  return Encode(std::u32string_view(cps).substr(b, e - b));
}

std::vector<std::string> Split(std::string_view s, const std::optional<std::string>& sep,
                               int64_t maxsplit, bool from_right) {
  std::vector<std::string> parts;
  if (maxsplit < 0) maxsplit = INT64_MAX;
  if (sep) {
    if (sep->empty()) Fail("split(): empty separator");
    if (!from_right) {
      size_t pos = 0;
      while (static_cast<int64_t>(parts.size()) < maxsplit) {
        const size_t hit = s.find(*sep, pos);
        if (hit == std::string_view::npos) break;
        parts.emplace_back(s.substr(pos, hit - pos));
        pos = hit + sep->size();
      }
      parts.emplace_back(s.substr(pos));
    } else {
      size_t end = s.size();
      std::vector<std::string> rev;
      while (static_cast<int64_t>(rev.size()) < maxsplit && end >= sep->size()) {
        const size_t hit = s.rfind(*sep, end - sep->size());
        if (hit == std::string_view::npos) break;
        rev.emplace_back(s.substr(hit + sep->size(), end - hit - sep->size()));
        end = hit;
      }
      rev.emplace_back(s.substr(0, end));
      parts.assign(rev.rbegin(), rev.rend());
    }
    return parts;
  }
  // Whitespace split: runs of whitespace separate, leading/trailing whitespace is dropped.
  const std::u32string cps = Decode(s);
  if (!from_right) {
    size_t i = 0;
    while (true) {
      while (i < cps.size() && IsSpace(cps[i])) ++i;
      if (i == cps.size()) break;
      if (static_cast<int64_t>(parts.size()) == maxsplit) {
        size_t e = cps.size();
        while (e > i && IsSpace(cps[e - 1])) --e;
        parts.push_back(Encode(std::u32string_view(cps).substr(i, e - i)));
        break;
      }
      size_t j = i;
      while (j < cps.size() && !IsSpace(cps[j])) ++j;
      parts.push_back(Encode(std::u32string_view(cps).substr(i, j - i)));
      i = j;
    }
  } else {
    size_t e = cps.size();
    std::vector<std::string> rev;
    while (true) {
      while (e > 0 && IsSpace(cps[e - 1])) --e;
      if (e == 0) break;
      if (static_cast<int64_t>(rev.size()) == maxsplit) {
        size_t b = 0;
        while (b < e && IsSpace(cps[b])) ++b;
        rev.push_back(Encode(std::u32string_view(cps).substr(b, e - b)));
        break;
      }
      size_t j = e;
      while (j > 0 && !IsSpace(cps[j - 1])) --j;
      rev.push_back(Encode(std::u32string_view(cps).substr(j, e - j)));
      e = j;
    }
    parts.assign(rev.rbegin(), rev.rend());
  }
  return parts;
}

std::vector<std::string> SplitLines(std::string_view s, bool keepends) {
  const std::u32string cps = Decode(s);
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i < cps.size(); ++i) {
    const char32_t c = cps[i];
    const bool brk = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || (c >= 0x1C && c <= 0x1E) ||
                     c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!brk) continue;
    size_t end = i + 1;
    if (c == '\r' && i + 1 < cps.size() && cps[i + 1] == '\n') end = i + 2;
    out.push_back(Encode(std::u32string_view(cps).substr(start, (keepends ? end : i) - start)));
    start = end;
    i = end - 1;
  }
  if (start < cps.size()) out.push_back(Encode(std::u32string_view(cps).substr(start)));
  return out;
}

std::string Upper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : Decode(s)) {
    if (const char32_t* special = UpperSpecial(c)) {
      for (int i = 0; i < 4 && special[i]; ++i) AppendUtf8(out, special[i]);
      continue;
    }
    if (UpperIsUnsupported(c)) {
      Fail("upper(): Python's special-cased mapping of U+", HexEscape(c).substr(2), " is not supported");
    }
    AppendUtf8(out, ToUpper(c));
  }
  return out;
}

std::string Lower(std::string_view s) {
  const std::u32string cps = Decode(s);
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < cps.size(); ++i) {
    const char32_t c = cps[i];
    if (c == 0x0130) Fail("lower(): Python's special-cased mapping of U+0130 is not supported");
    if (c == 0x03A3) {
      // Final sigma: a capital sigma that ends a word lower-cases to U+03C2.
      const bool after_letter = i > 0 && IsAlpha(cps[i - 1]);
      const bool before_letter = i + 1 < cps.size() && IsAlpha(cps[i + 1]);
      AppendUtf8(out, after_letter && !before_letter ? 0x03C2 : 0x03C3);
      continue;
    }
    AppendUtf8(out, ToLower(c));
  }
  return out;
}

std::string Capitalize(std::string_view s) {
  std::u32string cps = Decode(s);
  if (cps.empty()) return "";
  if (IsTitleDigraph(cps[0]) || UpperSpecial(cps[0])) Fail("capitalize(): title-casing this first character is not supported");
  const std::string first = Upper(Encode(std::u32string_view(cps).substr(0, 1)));
  return first + Lower(Encode(std::u32string_view(cps).substr(1)));
}

std::string Title(std::string_view s) {
  // jinja2's do_title: split on runs of [-\s({[<], upper-case each piece's first character.
  const std::u32string cps = Decode(s);
  auto is_delim = [](char32_t c) { return IsSpace(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<'; };
  std::string out;
  size_t i = 0;
  while (i < cps.size()) {
    size_t j = i;
    const bool delim = is_delim(cps[i]);
    while (j < cps.size() && is_delim(cps[j]) == delim) ++j;
    const std::u32string_view piece = std::u32string_view(cps).substr(i, j - i);
    out += Upper(Encode(piece.substr(0, 1))) + Lower(Encode(piece.substr(1)));
    i = j;
  }
  return out;
}

bool IsLower(std::string_view s) {
  bool cased = false;
  for (char32_t c : Decode(s)) {
    if (ToUpper(c) != c) cased = true;        // has an upper-case form: a lower-case letter
    else if (ToLower(c) != c) return false;   // an upper-case letter
  }
  return cased;
}

bool IsUpper(std::string_view s) {
  bool cased = false;
  for (char32_t c : Decode(s)) {
    if (ToLower(c) != c) cased = true;
    else if (ToUpper(c) != c) return false;
  }
  return cased;
}

std::string Repr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t c : Decode(s)) {
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (!IsPrintable(c)) {
      out += HexEscape(c);
    } else {
      AppendUtf8(out, c);
    }
  }
  out += quote;
  return out;
}

std::string FloatRepr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == 0) return std::signbit(v) ? "-0.0" : "0.0";
  // Shortest round-trip digits, then CPython's layout: positional for 1e-4 <= |v| < 1e16.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  const bool neg = sci[0] == '-';
  if (neg) sci.erase(0, 1);
  const size_t e = sci.find('e');
  std::string digits = sci.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int exp10 = std::stoi(sci.substr(e + 1));
  const int decpt = exp10 + 1;  // value = 0.DIGITS * 10^decpt
  std::string out = neg ? "-" : "";
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out += "0." + std::string(-decpt, '0') + digits;
    } else if (decpt >= static_cast<int>(digits.size())) {
      out += digits + std::string(decpt - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, decpt) + "." + digits.substr(decpt);
    }
  } else {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += std::string(".") + digits.substr(1);
    char ebuf[16];
    std::snprintf(ebuf, sizeof ebuf, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
    out += ebuf;
  }
  return out;
}

std::vector<int64_t> SliceIndices(int64_t len, std::optional<int64_t> start, std::optional<int64_t> stop,
                                  std::optional<int64_t> step) {
  const int64_t st = step.value_or(1);
  if (st == 0) Fail("slice step cannot be zero");
  const int64_t lower = st > 0 ? 0 : -1;
  const int64_t upper = st > 0 ? len : len - 1;
  auto clamp = [&](std::optional<int64_t> v, int64_t fallback) {
    if (!v) return fallback;
    int64_t x = *v;
    if (x < 0) {
      x += len;
      if (x < lower) x = lower;
    } else if (x > upper) {
      x = upper;
    }
    return x;
  };
  const int64_t b = clamp(start, st > 0 ? lower : upper);
  const int64_t e = clamp(stop, st > 0 ? upper : lower);
  std::vector<int64_t> idx;
  for (int64_t i = b; st > 0 ? i < e : i > e; i += st) idx.push_back(i);
  return idx;
}

}  // namespace dflash::jinja::py
