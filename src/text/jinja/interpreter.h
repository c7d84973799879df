// Walks the statement tree and writes the output. Scoping follows jinja2: `if` shares its
// enclosing scope, each for-loop iteration gets a fresh scope (so a `set` in a loop body is gone
// by the next iteration; templates use namespace() to carry state), macros see the scope they
// were defined in, and block-level sets/filters/with get their own scope.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "text/jinja/ast.h"
#include "text/jinja/builtins.h"

namespace dflash::jinja {

// Renders `body` with `variables` (which shadow the globals). Throws LocatedError.
std::string Render(const Body& body, const std::vector<std::pair<std::string, Value>>& variables,
                   const GlobalOptions& options);

}  // namespace dflash::jinja
