// A parsed Jinja template, rendered the way transformers renders chat templates (jinja2 with
// trim_blocks and lstrip_blocks, the immutable sandbox, and transformers' tojson,
// raise_exception and strftime_now). Parsing checks every tag, filter and test up front, so an
// unsupported feature fails at load time with an Error that names it and its line.
#pragma once

#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace dflash::jinja {

struct RenderOptions {
  std::optional<std::tm> now;  // what strftime_now() reports; the current local time when unset
};

class Template {
 public:
  // `name` (e.g. the file it came from) prefixes error messages: "NAME:LINE: message".
  Template(std::string_view source, std::string name);
  ~Template();
  Template(Template&&) noexcept;
  Template& operator=(Template&&) noexcept;

  // `variables` is a JSON object; each member becomes a template variable. Ordered JSON keeps
  // the key order of tool schemas, which tojson reproduces.
  std::string Render(const nlohmann::ordered_json& variables, const RenderOptions& options = {}) const;

  const std::string& name() const { return name_; }
  const std::string& source() const { return source_; }

 private:
  struct Program;
  std::string name_;
  std::string source_;
  std::unique_ptr<const Program> program_;
};

}  // namespace dflash::jinja
