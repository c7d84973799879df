// Template source -> tokens, with jinja2's whitespace control as transformers configures it:
// trim_blocks (drop the newline after a block or comment tag), lstrip_blocks (drop the
// indentation before one), "-" markers that strip all whitespace on that side, "+" markers that
// keep it, and one trailing newline of the source removed.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dflash::jinja {

enum class Tok {
  kData,           // literal text (also the body of {% raw %})
  kVariableBegin,  // {{
  kVariableEnd,    // }}
  kBlockBegin,     // {%
  kBlockEnd,       // %}
  kName,
  kString,         // value already unescaped
  kInteger,
  kFloat,
  kOperator,
  kEnd,            // end of the template
};

struct Token {
  Tok type;
  std::string text;
  int line;
  int64_t int_value = 0;
  double float_value = 0;
};

// Throws LocatedError for unclosed tags, stray brackets, bad literals and invalid UTF-8.
std::vector<Token> Tokenize(std::string_view source);

}  // namespace dflash::jinja
