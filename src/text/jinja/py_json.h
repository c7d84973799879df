// json.dumps with the arguments transformers' `tojson` filter exposes: unlike jinja2's own tojson
// it keeps non-ASCII text and does not HTML-escape, and its default separators are Python's
// (", " and ": "), so tool schemas render byte-for-byte as in transformers.
#pragma once

#include <optional>
#include <string>

#include "text/jinja/value.h"

namespace dflash::jinja {

struct JsonDumpOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;  // json.dumps(indent=4) arrives as "    "
  std::optional<std::string> item_separator, key_separator;
  bool sort_keys = false;
};

std::string DumpJson(const Value& v, const JsonDumpOptions& options);

}  // namespace dflash::jinja
