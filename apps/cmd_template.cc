// dflash template: render a chat template the way the server will, for checking prompts by eye
// or diffing against transformers' apply_chat_template(..., tokenize=False).
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "args.h"
#include "commands.h"
#include "core/error.h"
#include "text/chat_template.h"

namespace dflash::app {

namespace {

using OJson = nlohmann::ordered_json;

std::string ReadAll(const std::string& path) {
  if (path == "-") {
    std::stringstream ss;
    ss << std::cin.rdbuf();
    return ss.str();
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) Fail(path, ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

OJson ParseJson(const std::string& text, const std::string& what) {
  try {
    return OJson::parse(text);
  } catch (const OJson::parse_error& e) {
    Fail(what, ": malformed JSON: ", e.what());
  }
}

}  // namespace

int Template(int argc, char** argv) {
  std::string tokenizer, messages_file, tools_file, kwargs_text, template_file, name;
  bool no_generation_prompt = false;
  Args args("template",
            "Render a chat template (from a model/tokenizer directory or a .jinja file) over a conversation and\n"
            "print the prompt exactly, as transformers' apply_chat_template(..., tokenize=False) would.");
  args.Option("--tokenizer", &tokenizer, "DIR", "model or tokenizer directory (chat template, special tokens)");
  args.Option("--messages", &messages_file, "FILE",
              "JSON list of messages, or an object with \"messages\" (and \"tools\"); - reads stdin");
  args.Option("--tools", &tools_file, "FILE", "JSON list of tool schemas");
  args.Flag("--no-generation-prompt", &no_generation_prompt, "do not open an assistant turn at the end");
  args.Option("--kwargs", &kwargs_text, "JSON", "extra template variables, e.g. '{\"enable_thinking\": false}'");
  args.Option("--template", &template_file, "FILE", "use this .jinja file instead of the directory's template");
  args.Option("--name", &name, "NAME", "pick a named template (e.g. tool_use) when the model has several");
  if (!args.Parse(argc, argv)) return 0;
  if (messages_file.empty()) Fail("dflash template: --messages FILE is required");
  if (tokenizer.empty() && template_file.empty()) Fail("dflash template: give --tokenizer DIR or --template FILE");

  OJson messages = ParseJson(ReadAll(messages_file), messages_file);
  OJson tools;
  if (messages.is_object()) {
    if (messages.contains("tools")) tools = messages["tools"];
    if (!messages.contains("messages")) Fail(messages_file, ": object without a \"messages\" field");
    messages = OJson(messages["messages"]);
  }
  if (!tools_file.empty()) tools = ParseJson(ReadAll(tools_file), tools_file);
  const OJson kwargs = kwargs_text.empty() ? OJson::object() : ParseJson(kwargs_text, "--kwargs");

  std::optional<ChatTemplate> tmpl;
  if (template_file.empty()) {
    tmpl.emplace(ChatTemplate::FromDirectory(tokenizer));
  } else {
    const OJson tokens = tokenizer.empty() ? OJson::object() : ChatTemplate::FromDirectory(tokenizer).special_tokens();
    tmpl.emplace(std::map<std::string, std::string>{{"default", ReadAll(template_file)}}, tokens, template_file);
  }
  const std::string prompt = name.empty() ? tmpl->Render(messages, tools, !no_generation_prompt, kwargs)
                                          : tmpl->RenderNamed(name, messages, tools, !no_generation_prompt, kwargs);
  std::fwrite(prompt.data(), 1, prompt.size(), stdout);
  return 0;
}

}  // namespace dflash::app
