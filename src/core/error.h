// Errors: one exception type whose message names the file, tensor, field or value at fault.
// Front ends catch it, print the message and exit non-zero (CLI) or answer 4xx/5xx (server).
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace dflash {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Fail("file ", path, ": tensor ", name, " missing") - concatenates its arguments and throws.
template <typename... Args>
[[noreturn]] void Fail(Args&&... parts) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(parts));
  throw Error(os.str());
}

}  // namespace dflash
