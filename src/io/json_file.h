// JSON config files, with typed field access whose errors name the file and the field.
//
// Model files are untrusted: nlohmann's dump() and copy recurse once per nesting level, so a
// value nested 100k deep overflows the stack. ParseJson refuses such documents before they are
// built, and error messages describe values with JsonSummary, which never recurses.
#pragma once

#include <nlohmann/json.hpp>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "core/error.h"

namespace dflash {

using Json = nlohmann::json;

// Deeper than any config.json, tokenizer.json or safetensors header (5 levels at most, a
// tokenizer's nested normalizer sequences), shallow enough that recursion over it is harmless.
inline constexpr int kMaxJsonDepth = 64;

// Parses `text` (nested at most kMaxJsonDepth levels); throws Error naming `where` and the
// parse position or the byte where the nesting went too deep.
Json ParseJson(std::string_view text, const std::string& where);
Json ReadJsonFile(const std::string& path);  // ParseJson of the file's contents

// For error messages: a scalar's JSON text, cut to a short prefix, or "an array of N items" /
// "an object of N fields". Never recurses and never throws on invalid UTF-8.
std::string JsonSummary(const Json& v);

namespace detail {
template <typename T>
struct IsVector : std::false_type {};
template <typename T>
struct IsVector<std::vector<T>> : std::true_type {};

// Whether the JSON integer `v` fits in T (integral) without wrapping.
template <typename T>
bool FitsIn(const Json& v) {
  if (v.is_number_unsigned()) {
    return v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max());
  }
  const int64_t x = v.get<int64_t>();
  if constexpr (std::is_unsigned_v<T>) {
    return x >= 0 && static_cast<uint64_t>(x) <= std::numeric_limits<T>::max();
  } else {
    return x >= std::numeric_limits<T>::min() && x <= std::numeric_limits<T>::max();
  }
}
}  // namespace detail

// A JSON object together with the file it came from, so that every lookup error says
// "config.json: field 'hidden_size' ...".
class JsonObject {
 public:
  JsonObject(const Json& j, std::string where) : j_(j), where_(std::move(where)) {
    if (!j_.is_object()) Fail(where_, ": expected a JSON object");
  }
  bool Has(const std::string& key) const { return j_.contains(key) && !j_.at(key).is_null(); }
  const Json& raw() const { return j_; }
  const std::string& where() const { return where_; }

  template <typename T>
  T Get(const std::string& key) const {
    if (!Has(key)) Fail(where_, ": required field '", key, "' is missing");
    return Convert<T>(key);
  }
  template <typename T>
  T Get(const std::string& key, T fallback) const {
    return Has(key) ? Convert<T>(key) : fallback;
  }
  JsonObject Child(const std::string& key) const {
    return JsonObject(j_.at(key), where_ + ": " + key);
  }

 private:
  // Throws std::invalid_argument when `v` is not a T; integers must fit T without wrapping
  // (hidden_size 2^32 + 64 is not 64).
  template <typename T>
  static void CheckType(const Json& v) {
    if constexpr (std::is_same_v<T, bool>) {
      if (!v.is_boolean()) throw std::invalid_argument("not a boolean");
    } else if constexpr (std::is_integral_v<T>) {
      if (!v.is_number_integer()) throw std::invalid_argument("not an integer");
      if (!detail::FitsIn<T>(v)) {
        throw std::invalid_argument("out of range [" + std::to_string(std::numeric_limits<T>::min()) + ", " +
                                    std::to_string(std::numeric_limits<T>::max()) + "]");
      }
    } else if constexpr (std::is_floating_point_v<T>) {
      if (!v.is_number()) throw std::invalid_argument("not a number");
    } else if constexpr (detail::IsVector<T>::value) {
      if (!v.is_array()) throw std::invalid_argument("not an array");
      for (const Json& item : v) CheckType<typename T::value_type>(item);
    }
  }

  template <typename T>
  T Convert(const std::string& key) const {
    const Json& v = j_.at(key);
    try {
      CheckType<T>(v);
      return v.get<T>();
    } catch (const std::exception& e) {
      Fail(where_, ": field '", key, "' = ", JsonSummary(v), ": ", e.what());
    }
  }

  const Json& j_;
  std::string where_;
};

}  // namespace dflash
