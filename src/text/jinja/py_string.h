// Python str semantics over UTF-8 std::string: chat templates were written against CPython, so
// lengths, indices and slices count code points, strip() knows Unicode whitespace, and repr()
// picks quotes the way CPython does. Inputs are valid UTF-8 (template sources and JSON strings
// are checked on the way in).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "text/utf8.h"

namespace dflash::jinja::py {

std::u32string Decode(std::string_view utf8);
std::string Encode(std::u32string_view cps);
using text::AppendUtf8;  // one UTF-8 writer for the tokenizer and the templates
bool IsValidUtf8(std::string_view s);
size_t Length(std::string_view utf8);  // in code points

bool IsSpace(char32_t c);  // str.isspace()

// str.strip/lstrip/rstrip; chars == nullopt strips whitespace.
std::string Strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right);
// str.split / str.rsplit; sep == nullopt splits on whitespace runs.
std::vector<std::string> Split(std::string_view s, const std::optional<std::string>& sep,
                               int64_t maxsplit, bool from_right);
std::vector<std::string> SplitLines(std::string_view s, bool keepends);

// Case mapping with Python's results; throws Error for the few characters whose Python mapping
// needs special casing rules we do not carry (e.g. U+00DF upper-cases to "SS").
std::string Upper(std::string_view s);
std::string Lower(std::string_view s);
std::string Capitalize(std::string_view s);  // str.capitalize()
std::string Title(std::string_view s);       // jinja's title filter (word starts after - space ( { [ <)
bool IsLower(std::string_view s);            // str.islower()
bool IsUpper(std::string_view s);            // str.isupper()

std::string Repr(std::string_view s);  // repr(str): 'it''s' -> "it's"
std::string FloatRepr(double v);       // repr(float): 1.0, 1e+16, 1.5e-05, nan, inf

// Python-style index normalisation for seq[start:stop:step] over `len` items.
std::vector<int64_t> SliceIndices(int64_t len, std::optional<int64_t> start,
                                  std::optional<int64_t> stop, std::optional<int64_t> step);

}  // namespace dflash::jinja::py
