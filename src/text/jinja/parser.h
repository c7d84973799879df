// Tokens -> statement tree, following jinja2's grammar and operator precedence (filters bind
// tighter than arithmetic, `~` sits between + and *, `is` tests apply to a unary operand).
// Filters and tests are resolved here, so a template naming an unknown or unsupported one is
// rejected when it is loaded.
#pragma once

#include <vector>

#include "text/jinja/ast.h"
#include "text/jinja/lexer.h"

namespace dflash::jinja {

// Throws LocatedError for syntax errors, unknown or unsupported tags, filters and tests.
Body Parse(const std::vector<Token>& tokens);

}  // namespace dflash::jinja
