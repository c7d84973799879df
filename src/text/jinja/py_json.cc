#include "text/jinja/py_json.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/error.h"
#include "text/jinja/limits.h"
#include "text/jinja/py_string.h"

namespace dflash::jinja {

namespace {

void AppendEscaped(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  auto hex4 = [&out](unsigned v) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "\\u%04x", v);
    out += buf;
  };
  for (char32_t c : py::Decode(s)) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20 || (ensure_ascii && c >= 0x7F)) {
          if (c >= 0x10000) {
            const char32_t v = c - 0x10000;
            hex4(0xD800 | ((v >> 10) & 0x3FF));
            hex4(0xDC00 | (v & 0x3FF));
          } else {
            hex4(c);
          }
        } else {
          py::AppendUtf8(out, c);
        }
    }
  }
  out += '"';
}

std::string FloatJson(double f) {
  if (std::isnan(f)) return "NaN";
  if (std::isinf(f)) return f > 0 ? "Infinity" : "-Infinity";
  return py::FloatRepr(f);
}

std::string KeyText(const Value& k) {
  switch (k.kind()) {
    case Value::Kind::kString: return k.str();
    case Value::Kind::kInt: return std::to_string(k.as_int());
    case Value::Kind::kFloat: return FloatJson(k.as_float());
    case Value::Kind::kBool: return k.as_bool() ? "true" : "false";
    case Value::Kind::kNone: return "null";
    default: Fail("tojson: keys must be str, int, float, bool or None, not ", k.TypeName());
  }
}

class Dumper {
 public:
  explicit Dumper(const JsonDumpOptions& o) : o_(o) {
    item_sep_ = o.item_separator.value_or(o.indent ? "," : ", ");
    key_sep_ = o.key_separator.value_or(": ");
  }

  void Dump(const Value& v, int depth) {
    if (depth > kMaxValueDepth) Fail("tojson: value nested too deeply");
    // Each value appends at most one escaped string past this check, so a list holding one big
    // string a million times stops here instead of filling memory.
    if (out_.size() > kMaxTextBytes) Fail("tojson: output would grow past ", kMaxTextBytes >> 20, " MiB");
    switch (v.kind()) {
      case Value::Kind::kNone: out_ += "null"; return;
      case Value::Kind::kBool: out_ += v.as_bool() ? "true" : "false"; return;
      case Value::Kind::kInt: out_ += std::to_string(v.as_int()); return;
      case Value::Kind::kFloat: out_ += FloatJson(v.as_float()); return;
      case Value::Kind::kString: AppendEscaped(out_, v.str(), o_.ensure_ascii); return;
      case Value::Kind::kList:
      case Value::Kind::kTuple: {
        const List& items = v.items();
        if (items.empty()) {
          out_ += "[]";
          return;
        }
        out_ += '[';
        for (size_t i = 0; i < items.size(); ++i) {
          if (i) out_ += item_sep_;
          Newline(depth + 1);
          Dump(items[i], depth + 1);
        }
        Newline(depth);
        out_ += ']';
        return;
      }
      case Value::Kind::kDict: {
        std::vector<const std::pair<Value, Value>*> entries;
        for (const auto& e : v.dict().entries) entries.push_back(&e);
        if (entries.empty()) {
          out_ += "{}";
          return;
        }
        if (o_.sort_keys) {
          std::stable_sort(entries.begin(), entries.end(),
                           [](const auto* a, const auto* b) { return Less(a->first, b->first); });
        }
        out_ += '{';
        for (size_t i = 0; i < entries.size(); ++i) {
          if (i) out_ += item_sep_;
          Newline(depth + 1);
          AppendEscaped(out_, KeyText(entries[i]->first), o_.ensure_ascii);
          out_ += key_sep_;
          Dump(entries[i]->second, depth + 1);
        }
        Newline(depth);
        out_ += '}';
        return;
      }
      default: Fail("tojson: Object of type ", v.TypeName(), " is not JSON serializable");
    }
  }

  std::string Take() { return std::move(out_); }

 private:
  void Newline(int depth) {
    if (!o_.indent) return;
    out_ += '\n';
    for (int i = 0; i < depth; ++i) AppendText(out_, *o_.indent);
  }

  const JsonDumpOptions& o_;
  std::string item_sep_, key_sep_, out_;
};

}  // namespace

std::string DumpJson(const Value& v, const JsonDumpOptions& options) {
  Dumper d(options);
  d.Dump(v, 0);
  return d.Take();
}

}  // namespace dflash::jinja
