#include "text/jinja/limits.h"

#include "core/error.h"

namespace dflash::jinja {

void CheckRepetition(uint64_t unit, uint64_t count, uint64_t limit, const char* what) {
  if (unit != 0 && count > limit / unit) {
    Fail(what, " too large: ", count, " x ", unit, " is over the limit of ", limit);
  }
}

void AppendText(std::string& out, std::string_view piece) {
  if (out.size() > kMaxTextBytes || piece.size() > kMaxTextBytes - out.size()) {
    Fail("template text would grow past ", kMaxTextBytes >> 20, " MiB (the limit of one string or prompt)");
  }
  out += piece;
}

}  // namespace dflash::jinja
