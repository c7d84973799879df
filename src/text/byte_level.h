// GPT-2's byte-level alphabet: every byte gets a printable stand-in character so that a
// vocabulary of strings can hold arbitrary bytes. Byte-level tokenizer.json files store
// their vocabularies and merges in this alphabet ("Ġ" is the space byte).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace dflash::text {

// The stand-in code point for `byte`.
char32_t ByteToChar(unsigned char byte);

// The bytes a vocabulary string stands for, or nullopt when it has a character outside
// the alphabet (then the reference decoder uses the string's own UTF-8 bytes). `token`
// must be valid UTF-8.
std::optional<std::string> CharsToBytes(std::string_view token);

// `bytes` written in the stand-in alphabet (how tokenizer.json spells the token).
std::string BytesToChars(std::string_view bytes);

}  // namespace dflash::text
