#include "open_tokenizer.h"

#include <filesystem>
#include <map>

#include "core/error.h"
#include "model/load.h"

namespace dflash::app {

namespace {

// llama.cpp's keys: tokenizer.chat_template (the default) and tokenizer.chat_template.NAME for
// the named ones (tool_use, rag), as converters write a tokenizer_config.json's list.
constexpr std::string_view kTemplateKey = "tokenizer.chat_template";

std::map<std::string, std::string> GgufTemplates(const Json& metadata, const std::string& path) {
  std::map<std::string, std::string> sources;
  for (const auto& [key, value] : metadata.items()) {
    std::string name;
    if (key == kTemplateKey) {
      name = "default";
    } else if (key.starts_with(std::string(kTemplateKey) + ".")) {
      name = key.substr(kTemplateKey.size() + 1);
    } else {
      continue;  // not a template (tokenizer.chat_templates lists the names)
    }
    if (!value.is_string()) Fail(path, ": metadata ", key, " must be a string, got ", JsonSummary(value));
    sources[name] = value.get<std::string>();
  }
  return sources;
}

// What transformers passes a template as bos_token etc., spelled from the GGUF's own ids.
nlohmann::ordered_json GgufSpecialTokens(const text::Tokenizer& tok) {
  nlohmann::ordered_json special = nlohmann::ordered_json::object();
  const std::pair<const char*, int32_t> named[] = {
      {"bos_token", tok.bos_id()}, {"eos_token", tok.eos_id()}, {"pad_token", tok.pad_id()}};
  for (const auto& [name, id] : named) {
    if (id >= 0) special[name] = tok.TokenBytes(id);
  }
  return special;
}

bool HasTokenizer(const ModelSource& source) {
  if (source.gguf_metadata) return source.gguf_metadata->contains("tokenizer.ggml.tokens");
  return std::filesystem::exists(source.path + "/tokenizer.json");
}

text::Tokenizer TokenizerOf(const ModelSource& source) {
  if (source.gguf_metadata) return text::Tokenizer::FromGguf(*source.gguf_metadata, source.path);
  return text::Tokenizer::Load(source.path);
}

std::optional<text::Tokenizer> ModelTokenizer(const std::string& model) {
  const ModelSource source = OpenModelSource(model);
  if (!HasTokenizer(source)) return std::nullopt;
  return TokenizerOf(source);
}

}  // namespace

text::Tokenizer OpenTokenizer(const std::string& path) { return TokenizerOf(OpenModelSource(path)); }

ChatTemplate OpenChatTemplate(const std::string& path, const text::Tokenizer& tok) {
  const ModelSource source = OpenModelSource(path);
  if (!source.gguf_metadata) return ChatTemplate::FromDirectory(path);
  const std::map<std::string, std::string> sources = GgufTemplates(*source.gguf_metadata, path);
  if (sources.empty()) Fail(path, ": no ", kTemplateKey, " in the GGUF metadata (give --tokenizer DIR with one)");
  return ChatTemplate(sources, GgufSpecialTokens(tok), path + " (" + std::string(kTemplateKey) + ")");
}

ModelText::ModelText(const std::string& tokenizer_flag, const std::string& model)
    : source_(tokenizer_flag.empty() ? model : tokenizer_flag),
      tokenizer_(tokenizer_flag.empty() ? ModelTokenizer(model) : OpenTokenizer(tokenizer_flag)) {}

const text::Tokenizer& ModelText::RequireTokenizer(const std::string& what) const {
  if (!tokenizer_) {
    Fail(source_, ": no tokenizer (tokenizer.json, or tokenizer.ggml.* in a .gguf) for ", what,
         "; give --tokenizer DIR or token ids");
  }
  return *tokenizer_;
}

const ChatTemplate& ModelText::chat_template() {
  if (!chat_template_) chat_template_ = OpenChatTemplate(source_, RequireTokenizer("a chat template"));
  return *chat_template_;
}

std::vector<int32_t> ModelText::Encode(std::string_view text) const {
  const text::Tokenizer& tok = RequireTokenizer("a text prompt");
  std::vector<int32_t> ids;
  if (tok.add_bos() && tok.bos_id() >= 0) ids.push_back(tok.bos_id());
  const std::vector<int32_t> body = tok.Encode(text);
  ids.insert(ids.end(), body.begin(), body.end());
  return ids;
}

ChatPrompt ModelText::Chat(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& kwargs) {
  const ChatTemplate& tmpl = chat_template();
  return BuildChatPrompt(tmpl, *tokenizer_, messages, nullptr, kwargs);
}

}  // namespace dflash::app
