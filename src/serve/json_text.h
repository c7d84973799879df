// JSON text of values that may hold client bytes (a request path, a body that is not UTF-8, an
// error message quoting either). Invalid UTF-8 becomes U+FFFD: nlohmann's default throws
// type_error 316 instead, which from an error handler or a detached thread aborts the process.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace dflash::serve {

inline std::string DumpJson(const nlohmann::ordered_json& j, int indent = -1) {
  return j.dump(indent, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace dflash::serve
