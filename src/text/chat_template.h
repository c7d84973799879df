// A model's chat template: messages (+ tools) -> the prompt text, byte-identical to
// transformers' tokenizer.apply_chat_template(..., tokenize=False).
//
// Where it comes from (transformers' order): chat_template.jinja and
// additional_chat_templates/*.jinja in the model directory, else tokenizer_config.json's
// "chat_template" (one string, or a list of {"name", "template"}). Special tokens (bos_token,
// eos_token, ...) come from tokenizer_config.json and are template variables, as in transformers.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "text/jinja/template.h"

namespace dflash {

class ChatTemplate {
 public:
  // Reads a model or tokenizer directory. Throws Error naming the file when there is no
  // template, a file is malformed, or a template uses something the engine does not support.
  static ChatTemplate FromDirectory(const std::string& dir);
  // A template file (llama.cpp's --chat-template-file) with the special tokens of
  // `tokenizer_dir`'s tokenizer_config.json.
  static ChatTemplate FromFile(const std::string& path, const std::string& tokenizer_dir);

  // Templates by name ("default", "tool_use", ...) and special tokens as a JSON object
  // ({"bos_token": "<s>", ...}); `origin` names the source in error messages.
  ChatTemplate(const std::map<std::string, std::string>& sources, nlohmann::ordered_json special_tokens,
               const std::string& origin);

  // `messages`: JSON array of {"role", "content", ...}; `tools`: null or a JSON array of tool
  // schemas; `kwargs`: extra template variables (enable_thinking, reasoning_effort, ...).
  // Keys keep their order (ordered_json), which tojson reproduces.
  std::string Render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                     bool add_generation_prompt, const nlohmann::ordered_json& kwargs = nlohmann::ordered_json::object(),
                     const jinja::RenderOptions& options = {}) const;

  // Renders with the named template instead of the default choice.
  std::string RenderNamed(const std::string& name, const nlohmann::ordered_json& messages,
                          const nlohmann::ordered_json& tools, bool add_generation_prompt,
                          const nlohmann::ordered_json& kwargs = nlohmann::ordered_json::object(),
                          const jinja::RenderOptions& options = {}) const;

  // The template Render() uses (transformers' get_chat_template): "tool_use" when tools are
  // given and it exists, else "default". Its source() feeds DetectOutputFormat.
  const jinja::Template& Selected(bool has_tools) const;

  std::vector<std::string> names() const;
  const nlohmann::ordered_json& special_tokens() const { return special_tokens_; }

 private:
  std::string RenderWith(const jinja::Template& t, const nlohmann::ordered_json& messages,
                         const nlohmann::ordered_json& tools, bool add_generation_prompt,
                         const nlohmann::ordered_json& kwargs, const jinja::RenderOptions& options) const;

  std::map<std::string, jinja::Template> templates_;
  nlohmann::ordered_json special_tokens_;
  std::string origin_;
};

}  // namespace dflash
