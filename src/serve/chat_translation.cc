#include "serve/chat_translation.h"

#include "serve/api_error.h"

namespace dflash::serve {

OJson ChatBodyFrom(const OJson& body) {
  static constexpr const char* kShared[] = {
      "model", "stream", "temperature", "top_p", "top_k",
      // this server's extensions, accepted by every API
      "min_p", "seed", "spec_sampling", "ignore_eos", "chat_template_kwargs", "presence_penalty",
      "frequency_penalty", "repetition_penalty", "dflash_scripted_output"};
  OJson chat = OJson::object();
  for (const char* key : kShared) {
    if (const auto it = body.find(key); it != body.end()) chat[key] = *it;
  }
  return chat;
}

void SetTemplateVariable(OJson& chat, const char* name, OJson value) {
  OJson& kwargs = chat["chat_template_kwargs"];
  if (kwargs.is_null()) kwargs = OJson::object();
  if (kwargs.is_object()) kwargs[name] = std::move(value);  // else ParseChatRequest names the client's wrong type
}

std::string JoinedText(const OJson& blocks, const std::string& where, std::initializer_list<const char*> types,
                       const char* separator) {
  std::string names;
  for (const char* t : types) names += std::string(names.empty() ? "" : " or ") + "'" + t + "'";
  if (!blocks.is_array()) throw BadRequest("'" + where + "' must be a string or an array of " + names + " blocks", where);
  std::string text;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const std::string at = where + "[" + std::to_string(i) + "]";
    const OJson& b = blocks[i];
    if (!b.is_object()) throw BadRequest("'" + at + "' must be an object", at);
    const auto type = b.find("type");
    if (type == b.end() || !type->is_string()) throw BadRequest("'" + at + ".type' is required", at + ".type");
    bool known = false;
    for (const char* t : types) known = known || *type == t;
    if (!known) {
      throw BadRequest("'" + at + ".type' must be " + names + ", got '" + type->get<std::string>() + "' (not supported here)", at + ".type");
    }
    const auto t = b.find("text");
    if (t == b.end() || !t->is_string()) throw BadRequest("'" + at + ".text' must be a string", at + ".text");
    if (i > 0) text += separator;
    text += t->get<std::string>();
  }
  return text;
}

OJson ChatTools(const OJson& tools, const std::function<OJson(const Fields& tool)>& parameters) {
  OJson out = OJson::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string at = "tools[" + std::to_string(i) + "]";
    if (!tools[i].is_object()) throw BadRequest("'" + at + "' must be an object", at);
    const Fields t(tools[i], at + ".");
    const OJson schema = parameters(t);
    OJson fn = {{"name", t.RequiredString("name")}};
    if (const auto description = t.String("description")) fn["description"] = *description;
    if (!schema.is_null()) fn["parameters"] = schema;
    out.push_back({{"type", "function"}, {"function", std::move(fn)}});
  }
  return out;
}

void AddToolCall(OJson& messages, OJson call) {
  if (messages.empty() || messages.back()["role"] != "assistant") {
    messages.push_back({{"role", "assistant"}, {"content", ""}});
  }
  OJson& last = messages.back();
  if (!last.contains("tool_calls")) last["tool_calls"] = OJson::array();
  last["tool_calls"].push_back(std::move(call));
}

}  // namespace dflash::serve
