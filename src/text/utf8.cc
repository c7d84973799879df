#include "text/utf8.h"

namespace dflash::text {

namespace {

// Length of the character a lead byte announces, 0 for bytes that cannot start one.
int SequenceLength(unsigned char b) {
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) return 2;
  if (b >= 0xE0 && b <= 0xEF) return 3;
  if (b >= 0xF0 && b <= 0xF4) return 4;
  return 0;
}

// The second byte has a narrower range after some lead bytes: that is what rules out
// overlongs (E0, F0), surrogates (ED) and code points past U+10FFFF (F4).
bool SecondByteOk(unsigned char lead, unsigned char b) {
  switch (lead) {
    case 0xE0: return b >= 0xA0 && b <= 0xBF;
    case 0xED: return b >= 0x80 && b <= 0x9F;
    case 0xF0: return b >= 0x90 && b <= 0xBF;
    case 0xF4: return b >= 0x80 && b <= 0x8F;
    default: return b >= 0x80 && b <= 0xBF;
  }
}

// How many bytes from s[i] form a well-formed prefix of one character (at least 1 when a
// lead byte is valid), and its announced length. `prefix == length` means a whole one.
struct Prefix {
  int prefix;
  int length;
};

Prefix ValidPrefix(std::string_view s, size_t i) {
  const auto lead = static_cast<unsigned char>(s[i]);
  const int len = SequenceLength(lead);
  if (len <= 1) return {len, len};
  int n = 1;
  while (n < len && i + n < s.size()) {
    const auto b = static_cast<unsigned char>(s[i + n]);
    const bool ok = n == 1 ? SecondByteOk(lead, b) : (b >= 0x80 && b <= 0xBF);
    if (!ok) break;
    ++n;
  }
  return {n, len};
}

constexpr char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD

}  // namespace

size_t FindInvalidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const Prefix p = ValidPrefix(s, i);
    if (p.length == 0 || p.prefix < p.length) return i;
    i += p.length;
  }
  return kValidUtf8;
}

void TakeDecodable(std::string& pending, std::string& out, bool at_end) {
  const std::string_view s = pending;
  size_t i = 0;
  while (i < s.size()) {
    const Prefix p = ValidPrefix(s, i);
    if (p.length == 0) {  // a byte that never starts a character
      out += kReplacement;
      ++i;
    } else if (p.prefix == p.length) {
      out.append(s.substr(i, p.length));
      i += p.length;
    } else if (i + p.prefix == s.size() && !at_end) {
      break;  // the next token may complete it
    } else {
      out += kReplacement;  // cut short by a byte that cannot continue it, or by the end
      i += p.prefix;
    }
  }
  pending.erase(0, i);
}

std::string LossyUtf8(std::string_view bytes) {
  std::string pending(bytes), out;
  out.reserve(bytes.size());
  TakeDecodable(pending, out, /*at_end=*/true);
  return out;
}

void AppendUtf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

char32_t NextCodePoint(std::string_view s, size_t& i) {
  const auto lead = static_cast<unsigned char>(s[i]);
  const int len = SequenceLength(lead);
  if (len <= 1) {
    ++i;
    return lead;
  }
  char32_t cp = lead & (0x7F >> len);
  for (int k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  i += len;
  return cp;
}

}  // namespace dflash::text
