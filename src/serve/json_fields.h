// Checked access to a request's JSON fields: every read is type- and range-checked, and a bad
// value is a 400 ApiError naming the field by its path in the request ("tools[0].name").
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/error.h"
#include "serve/api_error.h"
#include "text/jinja/value.h"

namespace dflash::serve {

using OJson = nlohmann::ordered_json;

// Too deep a value is the client's error: a 400 naming the field, like every other bad field.
inline void CheckDepth(const OJson& value, const std::string& what, const std::string& param) {
  try {
    jinja::CheckJsonDepth(value, what);
  } catch (const Error& e) {
    throw BadRequest(e.what(), param);
  }
}

inline const char* TypeName(const OJson& v) { return v.type_name(); }

// Typed access to an object's fields; absent and null read as "not given".
class Fields {
 public:
  Fields(const OJson& object, std::string prefix) : o_(object), prefix_(std::move(prefix)) {}

  const OJson* Get(const std::string& key) const {
    const auto it = o_.find(key);
    return it == o_.end() || it->is_null() ? nullptr : &*it;
  }
  std::string Name(const std::string& key) const { return prefix_ + key; }
  [[noreturn]] void Wrong(const std::string& key, const char* expected) const {
    throw BadRequest("'" + Name(key) + "' must be " + expected + ", got " + TypeName(*Get(key)), Name(key));
  }

  std::optional<bool> Bool(const std::string& key) const {
    const OJson* v = Get(key);
    if (!v) return std::nullopt;
    if (!v->is_boolean()) Wrong(key, "a boolean");
    return v->get<bool>();
  }
  std::optional<std::string> String(const std::string& key) const {
    const OJson* v = Get(key);
    if (!v) return std::nullopt;
    if (!v->is_string()) Wrong(key, "a string");
    return v->get<std::string>();
  }
  std::optional<int64_t> Int(const std::string& key, int64_t lo, int64_t hi) const {
    const OJson* v = Get(key);
    if (!v) return std::nullopt;
    if (!v->is_number_integer()) Wrong(key, "an integer");
    if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      throw BadRequest("'" + Name(key) + "' is out of range", Name(key));
    }
    const int64_t x = v->get<int64_t>();
    if (x < lo || x > hi) {
      throw BadRequest("'" + Name(key) + "' must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                           "], got " + std::to_string(x),
                       Name(key));
    }
    return x;
  }
  std::optional<double> Number(const std::string& key, double lo, double hi, bool lo_open = false) const {
    const OJson* v = Get(key);
    if (!v) return std::nullopt;
    if (!v->is_number()) Wrong(key, "a number");
    const double x = v->get<double>();
    if (!std::isfinite(x) || x < lo || x > hi || (lo_open && x == lo)) {
      throw BadRequest("'" + Name(key) + "' must be in " + (lo_open ? "(" : "[") + Fmt(lo) + ", " + Fmt(hi) +
                           "], got " + v->dump(),
                       Name(key));
    }
    return x;
  }
  std::string RequiredString(const std::string& key) const {
    const auto s = String(key);
    if (!s || s->empty()) throw BadRequest("'" + Name(key) + "' is required (a non-empty string)", Name(key));
    return *s;
  }
  const OJson* Object(const std::string& key) const {
    const OJson* v = Get(key);
    if (v && !v->is_object()) Wrong(key, "an object");
    return v;
  }
  const OJson* Array(const std::string& key) const {
    const OJson* v = Get(key);
    if (v && !v->is_array()) Wrong(key, "an array");
    return v;
  }

 private:
  static std::string Fmt(double x) {
    std::string s = std::to_string(x);
    while (s.size() > 1 && s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
    return s;
  }
  const OJson& o_;
  std::string prefix_;
};

}  // namespace dflash::serve
