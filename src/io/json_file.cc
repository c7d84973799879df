#include "io/json_file.h"

#include <fstream>
#include <sstream>

namespace dflash {

namespace {

// Fails when `text` opens more than kMaxJsonDepth arrays or objects at once. A flat scan
// (brackets inside strings do not count), so it cannot itself overflow the stack; malformed
// text is left for the parser to report.
void CheckJsonDepth(std::string_view text, const std::string& where) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) {
        Fail(where, ": JSON nested deeper than ", kMaxJsonDepth, " levels at byte ", i);
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
}

// Room for a token or a short name; a longer scalar is cut with "...".
constexpr size_t kSummaryBytes = 64;

}  // namespace

Json ParseJson(std::string_view text, const std::string& where) {
  CheckJsonDepth(text, where);
  try {
    return Json::parse(text);
  } catch (const Json::parse_error& e) {
    Fail(where, ": malformed JSON: ", e.what());
  }
}

Json ReadJsonFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) Fail(path, ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseJson(ss.str(), path);
}

std::string JsonSummary(const Json& v) {
  if (v.is_array()) return "an array of " + std::to_string(v.size()) + " items";
  if (v.is_object()) return "an object of " + std::to_string(v.size()) + " fields";
  const bool cut = v.is_string() && v.get_ref<const std::string&>().size() > kSummaryBytes;
  const Json shown = cut ? Json(v.get_ref<const std::string&>().substr(0, kSummaryBytes)) : v;
  // replace: GGUF strings are raw bytes, and a cut may split a UTF-8 sequence.
  return shown.dump(-1, ' ', false, Json::error_handler_t::replace) + (cut ? "..." : "");
}

}  // namespace dflash
