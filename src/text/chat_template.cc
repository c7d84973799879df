#include "text/chat_template.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "text/jinja/value.h"

namespace dflash {

namespace fs = std::filesystem;
using OJson = nlohmann::ordered_json;

namespace {

// The named special tokens transformers passes to every template (special_tokens_map).
constexpr const char* kSpecialTokens[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                          "pad_token", "cls_token", "mask_token"};

std::string ReadText(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) Fail(path.string(), ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

OJson ReadJson(const fs::path& path) {
  try {
    return OJson::parse(ReadText(path));
  } catch (const OJson::parse_error& e) {
    Fail(path.string(), ": malformed JSON: ", e.what());
  }
}

// A token is either "<s>" or an AddedToken object {"content": "<s>", ...}.
OJson SpecialTokensFrom(const OJson& config, const std::string& where) {
  OJson tokens = OJson::object();
  for (const char* key : kSpecialTokens) {
    if (!config.contains(key) || config[key].is_null()) continue;
    const OJson& v = config[key];
    if (v.is_string()) tokens[key] = v;
    else if (v.is_object() && v.contains("content") && v["content"].is_string()) tokens[key] = v["content"];
    else Fail(where, ": field '", key, "' must be a string or an object with a \"content\" string");
  }
  return tokens;
}

}  // namespace

ChatTemplate ChatTemplate::FromDirectory(const std::string& dir) {
  const fs::path root(dir);
  const fs::path config_path = root / "tokenizer_config.json";
  OJson config = OJson::object();
  if (fs::exists(config_path)) {
    config = ReadJson(config_path);
    if (!config.is_object()) Fail(config_path.string(), ": expected a JSON object");
  }
  std::map<std::string, std::string> sources;
  if (fs::exists(root / "chat_template.jinja")) sources["default"] = ReadText(root / "chat_template.jinja");
  if (fs::is_directory(root / "additional_chat_templates")) {
    for (const auto& entry : fs::directory_iterator(root / "additional_chat_templates")) {
      if (entry.path().extension() == ".jinja") sources[entry.path().stem().string()] = ReadText(entry.path());
    }
  }
  std::string origin = sources.empty() ? config_path.string() : (root / "chat_template.jinja").string();
  if (sources.empty() && config.contains("chat_template")) {
    const OJson& t = config["chat_template"];
    if (t.is_string()) {
      sources["default"] = t.get<std::string>();
    } else if (t.is_array()) {
      for (const OJson& item : t) {
        if (!item.is_object() || !item.contains("name") || !item["name"].is_string() || !item.contains("template") ||
            !item["template"].is_string()) {
          Fail(config_path.string(), ": 'chat_template' list entries need string fields 'name' and 'template'");
        }
        sources[item["name"].get<std::string>()] = item["template"].get<std::string>();
      }
    } else {
      Fail(config_path.string(), ": 'chat_template' must be a string or a list of named templates");
    }
  }
  if (sources.empty()) {
    Fail(dir, ": no chat template (looked for chat_template.jinja and tokenizer_config.json 'chat_template')");
  }
  return ChatTemplate(sources, SpecialTokensFrom(config, config_path.string()), origin);
}

ChatTemplate ChatTemplate::FromFile(const std::string& path, const std::string& tokenizer_dir) {
  const fs::path config_path = fs::path(tokenizer_dir) / "tokenizer_config.json";
  OJson config = OJson::object();
  if (fs::exists(config_path)) {
    config = ReadJson(config_path);
    if (!config.is_object()) Fail(config_path.string(), ": expected a JSON object");
  }
  return ChatTemplate({{"default", ReadText(path)}}, SpecialTokensFrom(config, config_path.string()), path);
}

ChatTemplate::ChatTemplate(const std::map<std::string, std::string>& sources, OJson special_tokens,
                           const std::string& origin)
    : special_tokens_(std::move(special_tokens)), origin_(origin) {
  if (!special_tokens_.is_object()) Fail(origin, ": special tokens must be a JSON object");
  if (sources.empty()) Fail(origin, ": no chat template given");
  for (const auto& [name, source] : sources) {
    const std::string label = sources.size() == 1 ? origin : origin + " [" + name + "]";
    templates_.emplace(name, jinja::Template(source, label));
  }
}

std::vector<std::string> ChatTemplate::names() const {
  std::vector<std::string> out;
  for (const auto& [name, t] : templates_) out.push_back(name);
  return out;
}

const jinja::Template& ChatTemplate::Selected(bool has_tools) const {
  if (has_tools && templates_.count("tool_use")) return templates_.at("tool_use");
  if (templates_.count("default")) return templates_.at("default");
  std::string names;
  for (const auto& [name, t] : templates_) names += (names.empty() ? "" : ", ") + name;
  Fail(origin_, ": chat templates (", names, ") but none is named 'default'; pick one by name");
}

std::string ChatTemplate::Render(const OJson& messages, const OJson& tools, bool add_generation_prompt,
                                 const OJson& kwargs, const jinja::RenderOptions& options) const {
  return RenderWith(Selected(!tools.is_null()), messages, tools, add_generation_prompt, kwargs, options);
}

std::string ChatTemplate::RenderNamed(const std::string& name, const OJson& messages, const OJson& tools,
                                      bool add_generation_prompt, const OJson& kwargs,
                                      const jinja::RenderOptions& options) const {
  const auto it = templates_.find(name);
  if (it == templates_.end()) Fail(origin_, ": no chat template named '", name, "'");
  return RenderWith(it->second, messages, tools, add_generation_prompt, kwargs, options);
}

std::string ChatTemplate::RenderWith(const jinja::Template& t, const OJson& messages, const OJson& tools,
                                     bool add_generation_prompt, const OJson& kwargs,
                                     const jinja::RenderOptions& options) const {
  if (!messages.is_array()) Fail(origin_, ": messages must be a JSON array, got ", messages.type_name());
  if (messages.empty()) Fail(origin_, ": cannot apply the chat template to an empty conversation");
  for (const OJson& m : messages) {
    if (!m.is_object()) Fail(origin_, ": every message must be a JSON object, got ", m.type_name());
  }
  if (!tools.is_null() && !tools.is_array()) Fail(origin_, ": tools must be null or a JSON array, got ", tools.type_name());
  if (!kwargs.is_object()) Fail(origin_, ": template kwargs must be a JSON object, got ", kwargs.type_name());
  // Before the copies below, which recurse once per level of nesting: request bodies are
  // untrusted, and a few KiB of brackets would otherwise overflow the stack.
  jinja::CheckJsonDepth(messages, origin_ + ": messages");
  jinja::CheckJsonDepth(tools, origin_ + ": tools");
  jinja::CheckJsonDepth(kwargs, origin_ + ": template kwargs");
  // The variables transformers passes: messages, tools, documents, add_generation_prompt, the
  // special tokens, then the caller's kwargs (which may override special tokens only).
  OJson vars = OJson::object();
  vars["messages"] = messages;
  vars["tools"] = tools;
  vars["documents"] = nullptr;
  vars["add_generation_prompt"] = add_generation_prompt;
  for (const auto& [key, value] : special_tokens_.items()) vars[key] = value;
  for (const auto& [key, value] : kwargs.items()) {
    if (key == "messages" || key == "tools" || key == "documents" || key == "add_generation_prompt") {
      Fail(origin_, ": template kwargs may not set '", key, "'");
    }
    vars[key] = value;
  }
  return t.Render(vars, options);
}

}  // namespace dflash
