#include "text/tool_call_parser.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "core/error.h"
#include "text/jinja/py_json.h"

namespace dflash {

namespace {

using OJson = nlohmann::ordered_json;

std::string_view Trim(std::string_view s) {
  const auto ws = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (!s.empty() && ws(s.front())) s.remove_prefix(1);
  while (!s.empty() && ws(s.back())) s.remove_suffix(1);
  return s;
}

// Arguments text as Python's json.dumps writes it, so a call re-rendered through a chat
// template's tojson comes out as the model wrote it.
std::string DumpArguments(const OJson& args) {
  return jinja::DumpJson(jinja::Value::FromJson(args), jinja::JsonDumpOptions{});
}

std::optional<std::vector<ToolCall>> ParseHermes(std::string_view body) {
  const OJson j = OJson::parse(Trim(body), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return std::nullopt;
  const char* key = j.contains("arguments") ? "arguments" : j.contains("parameters") ? "parameters" : nullptr;
  const OJson args = key ? j[key] : OJson::object();
  ToolCall call{"", j["name"].get<std::string>(), ""};
  if (args.is_string()) call.arguments = args.get<std::string>();
  else if (args.is_object()) call.arguments = DumpArguments(args);
  else return std::nullopt;
  return std::vector<ToolCall>{call};
}

// The declared JSON-schema type of `param` of tool `function`, or nullptr.
const OJson* ParamType(const OJson& tools, const std::string& function, const std::string& param) {
  if (!tools.is_array()) return nullptr;
  for (const OJson& tool : tools) {
    if (!tool.is_object()) continue;
    const OJson& f = tool.contains("function") ? tool["function"] : tool;
    if (!f.is_object() || !f.contains("name") || f["name"] != function) continue;
    const auto params = f.find("parameters");
    if (params == f.end() || !params->is_object()) return nullptr;
    const auto props = params->find("properties");
    if (props == params->end() || !props->is_object()) return nullptr;
    const auto p = props->find(param);
    if (p == props->end() || !p->is_object()) return nullptr;
    const auto type = p->find("type");
    return type == p->end() ? nullptr : &*type;
  }
  return nullptr;
}

std::string TypeName(const OJson& type) {
  std::string t;
  if (type.is_string()) {
    t = type.get<std::string>();
  } else if (type.is_array()) {  // ["integer", "null"]: the first real type
    for (const OJson& x : type) {
      if (x.is_string() && x.get<std::string>() != "null") {
        t = x.get<std::string>();
        break;
      }
    }
  }
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return std::tolower(c); });
  return t;
}

bool StartsWith(const std::string& s, std::string_view p) { return s.compare(0, p.size(), p) == 0; }

// A parameter's text as the JSON value its schema asks for; text that does not fit stays text.
OJson ConvertParam(const std::string& text, const OJson* type) {
  if (text == "null") return nullptr;
  const std::string t = type ? TypeName(*type) : "string";
  if (t.empty() || t == "string" || t == "str" || t == "text" || t == "varchar" || t == "char" || t == "enum") {
    return text;
  }
  if (StartsWith(t, "int") || StartsWith(t, "uint") || t == "long" || t == "short" || t == "unsigned") {
    int64_t v = 0;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    return ec == std::errc() && ptr == text.data() + text.size() ? OJson(v) : OJson(text);
  }
  if (StartsWith(t, "num") || StartsWith(t, "float") || t == "double") {
    double v = 0;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || ptr != text.data() + text.size() || !std::isfinite(v)) return text;
    if (v == std::trunc(v) && std::fabs(v) < 9e15) return OJson(static_cast<int64_t>(v));
    return OJson(v);
  }
  if (t == "boolean" || t == "bool" || t == "binary") {
    std::string lower = text;
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
    if (lower == "true") return true;
    if (lower == "false") return false;
    return text;
  }
  const OJson parsed = OJson::parse(text, nullptr, /*allow_exceptions=*/false);
  return parsed.is_discarded() ? OJson(text) : parsed;
}

std::optional<std::vector<ToolCall>> ParseXml(std::string_view body, const OJson& tools) {
  static constexpr std::string_view kFunction = "<function=", kFunctionEnd = "</function>";
  static constexpr std::string_view kParam = "<parameter=", kParamEnd = "</parameter>";
  std::vector<ToolCall> calls;
  for (size_t pos = body.find(kFunction); pos != std::string_view::npos; pos = body.find(kFunction, pos)) {
    const size_t name_end = body.find('>', pos + kFunction.size());
    if (name_end == std::string_view::npos) return std::nullopt;
    const std::string name(Trim(body.substr(pos + kFunction.size(), name_end - pos - kFunction.size())));
    if (name.empty()) return std::nullopt;
    const size_t fend = std::min(body.find(kFunctionEnd, name_end), body.size());
    const std::string_view inner = body.substr(name_end + 1, fend - name_end - 1);
    OJson args = OJson::object();
    for (size_t p = inner.find(kParam); p != std::string_view::npos; p = inner.find(kParam, p)) {
      const size_t pname_end = inner.find('>', p + kParam.size());
      if (pname_end == std::string_view::npos) return std::nullopt;
      const std::string pname(Trim(inner.substr(p + kParam.size(), pname_end - p - kParam.size())));
      if (pname.empty()) return std::nullopt;
      const size_t vstart = pname_end + 1;
      const size_t vend = std::min({inner.find(kParamEnd, vstart), inner.find(kParam, vstart), inner.size()});
      std::string_view value = inner.substr(vstart, vend - vstart);
      // The template writes "<parameter=p>\n" VALUE "\n</parameter>".
      if (!value.empty() && value.front() == '\n') value.remove_prefix(1);
      if (!value.empty() && value.back() == '\n') value.remove_suffix(1);
      args[pname] = ConvertParam(std::string(value), ParamType(tools, name, pname));
      p = vend;
    }
    calls.push_back({"", name, DumpArguments(args)});
    pos = fend;
  }
  if (calls.empty()) return std::nullopt;
  return calls;
}

}  // namespace

std::optional<std::vector<ToolCall>> ParseToolCallBody(std::string_view body, ToolCallFormat format,
                                                       const OJson& tools) {
  try {
    switch (format) {
      case ToolCallFormat::kHermesJson: return ParseHermes(body);
      case ToolCallFormat::kXml: return ParseXml(body, tools);
      case ToolCallFormat::kNone: return std::nullopt;
    }
  } catch (const Error&) {  // e.g. an integer beyond 64 bits in the arguments
    return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace dflash
