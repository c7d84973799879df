#include "text/jinja/template.h"

#include "core/error.h"
#include "text/jinja/interpreter.h"
#include "text/jinja/located_error.h"
#include "text/jinja/parser.h"

namespace dflash::jinja {

struct Template::Program {
  Body body;
};

Template::Template(std::string_view source, std::string name) : name_(std::move(name)), source_(source) {
  try {
    program_ = std::make_unique<const Program>(Program{Parse(Tokenize(source))});
  } catch (const LocatedError& e) {
    Fail(name_, ":", e.line(), ": ", e.what());
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {  // a bug of ours, reported rather than crashing the caller
    Fail(name_, ": internal error while parsing: ", e.what());
  }
}

Template::~Template() = default;
Template::Template(Template&&) noexcept = default;
Template& Template::operator=(Template&&) noexcept = default;

std::string Template::Render(const nlohmann::ordered_json& variables, const RenderOptions& options) const {
  if (!variables.is_object()) Fail(name_, ": template variables must be a JSON object, got ", variables.type_name());
  std::vector<std::pair<std::string, Value>> vars;
  for (const auto& [key, value] : variables.items()) {
    vars.emplace_back(key, Value::FromJson(value, name_ + ": template variable '" + key + "'"));
  }
  try {
    return jinja::Render(program_->body, vars, GlobalOptions{options.now});
  } catch (const LocatedError& e) {
    Fail(name_, ":", e.line(), ": ", e.what());
  }
}

}  // namespace dflash::jinja
