// Errors raised while lexing, parsing or rendering a template carry the template line they point
// at; Template adds the template's name, so users read "Qwen3.jinja:12: unknown filter 'foo'".
#pragma once

#include <sstream>
#include <string>
#include <utility>

#include "core/error.h"

namespace dflash::jinja {

class LocatedError : public Error {
 public:
  LocatedError(int line, const std::string& message) : Error(message), line_(line) {}
  int line() const { return line_; }

 private:
  int line_;
};

template <typename... Args>
[[noreturn]] void FailAt(int line, Args&&... parts) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(parts));
  throw LocatedError(line, os.str());
}

}  // namespace dflash::jinja
