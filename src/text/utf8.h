// UTF-8 checks and the lossy decoding used at the end of detokenization. Token bytes may
// cut a character in half; the rules here decide what reaches the user and when.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace dflash::text {

inline constexpr size_t kValidUtf8 = std::string_view::npos;

// Offset of the first byte that does not start a complete, well-formed character
// (overlongs, surrogates and values above U+10FFFF are ill-formed), or kValidUtf8.
size_t FindInvalidUtf8(std::string_view s);

// Moves the decodable front of `pending` to the end of `out`. Ill-formed bytes become
// U+FFFD, one per maximal ill-formed subpart (the Unicode / WHATWG rule that Rust's
// from_utf8_lossy follows, so the result matches the reference detokenizer). A tail that
// could still become a character stays in `pending` unless `at_end`, when it too becomes
// U+FFFD. Called once with at_end=true this is plain lossy decoding.
void TakeDecodable(std::string& pending, std::string& out, bool at_end);

// Lossy decoding of a whole byte string.
std::string LossyUtf8(std::string_view bytes);

// Appends code point `cp` (assumed valid) as UTF-8.
void AppendUtf8(std::string& out, char32_t cp);

// Decodes the character at s[i] (which must be valid UTF-8) and advances i past it.
char32_t NextCodePoint(std::string_view s, size_t& i);

}  // namespace dflash::text
