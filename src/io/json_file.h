// JSON config files, with typed field access whose errors name the file and the field.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/error.h"

namespace dflash {

using Json = nlohmann::json;

Json ReadJsonFile(const std::string& path);  // throws Error naming the path and parse position

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
  template <typename T>
  T Convert(const std::string& key) const {
    const Json& v = j_.at(key);
    try {
      if constexpr (std::is_same_v<T, bool>) {
        if (!v.is_boolean()) throw std::invalid_argument("not a boolean");
      } else if constexpr (std::is_integral_v<T>) {
        if (!v.is_number_integer()) throw std::invalid_argument("not an integer");
      } else if constexpr (std::is_floating_point_v<T>) {
        if (!v.is_number()) throw std::invalid_argument("not a number");
      }
      return v.get<T>();
    } catch (const std::exception& e) {
      Fail(where_, ": field '", key, "' has the wrong type (", v.dump(), "): ", e.what());
    }
  }

  const Json& j_;
  std::string where_;
};

}  // namespace dflash
