// An error the server answers in OpenAI's format, {"error": {"message", "type", "param",
// "code"}}, with its HTTP status. Request parsing and the routes throw it; anything else that
// escapes a route (dflash::Error from the template or tokenizer) is mapped by the server.
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace dflash::serve {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string type, const std::string& message, std::string param = "", std::string code = "")
      : std::runtime_error(message), status_(status), type_(std::move(type)), param_(std::move(param)),
        code_(std::move(code)) {}

  int status() const { return status_; }
  nlohmann::ordered_json Body() const {
    nlohmann::ordered_json e;
    e["message"] = what();
    e["type"] = type_;
    e["param"] = param_.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(param_);
    e["code"] = code_.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(code_);
    return {{"error", e}};
  }

 private:
  int status_;
  std::string type_, param_, code_;
};

inline ApiError BadRequest(const std::string& message, const std::string& param = "") {
  return ApiError(400, "invalid_request_error", message, param);
}

}  // namespace dflash::serve
