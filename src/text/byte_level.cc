#include "text/byte_level.h"

#include <array>

#include "text/utf8.h"

namespace dflash::text {

namespace {

// Bytes that are printable Latin-1 stand for themselves; the other 68 take the code points
// from U+0100 upwards, in byte order.
struct Alphabet {
  std::array<char32_t, 256> byte_to_char{};
  std::array<int, 0x144> char_to_byte{};  // -1: not in the alphabet

  Alphabet() {
    char_to_byte.fill(-1);
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      byte_to_char[b] = printable ? static_cast<char32_t>(b) : next++;
      char_to_byte[byte_to_char[b]] = b;
    }
  }
};

const Alphabet& TheAlphabet() {
  static const Alphabet a;
  return a;
}

}  // namespace

char32_t ByteToChar(unsigned char byte) { return TheAlphabet().byte_to_char[byte]; }

std::optional<std::string> CharsToBytes(std::string_view token) {
  const Alphabet& a = TheAlphabet();
  std::string out;
  out.reserve(token.size());
  for (size_t i = 0; i < token.size();) {
    const char32_t cp = NextCodePoint(token, i);
    if (cp >= a.char_to_byte.size() || a.char_to_byte[cp] < 0) return std::nullopt;
    out += static_cast<char>(a.char_to_byte[cp]);
  }
  return out;
}

std::string BytesToChars(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) AppendUtf8(out, ByteToChar(b));
  return out;
}

}  // namespace dflash::text
