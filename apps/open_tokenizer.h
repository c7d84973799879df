// The text side of a model named on the command line: its tokenizer and chat template, from a
// folder (tokenizer.json, tokenizer_config.json, chat_template.jinja) or from a .gguf file's
// tokenizer.ggml.* and tokenizer.chat_template metadata.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "text/chat_prompt.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace dflash::app {

text::Tokenizer OpenTokenizer(const std::string& path);

// The chat template of a tokenizer folder or .gguf (`tok` is that model's tokenizer: a GGUF's
// template gets its bos/eos/pad spellings). Throws Error naming the file when it has none.
ChatTemplate OpenChatTemplate(const std::string& path, const text::Tokenizer& tok);

// The model's text side as the commands use it: the tokenizer of --tokenizer PATH when given,
// else the model's own (none when it has none), and its chat template, read on first use.
class ModelText {
 public:
  ModelText(const std::string& tokenizer_flag, const std::string& model);

  const std::string& source() const { return source_; }  // --tokenizer's path, else the model's
  const std::optional<text::Tokenizer>& tokenizer() const { return tokenizer_; }
  // Throws Error naming the model when it has no tokenizer; `what` says what needed one.
  const text::Tokenizer& RequireTokenizer(const std::string& what) const;
  const ChatTemplate& chat_template();  // throws Error naming the file when there is none

  // Plain text as the model reads it: BOS first where the tokenizer adds one.
  std::vector<int32_t> Encode(std::string_view text) const;
  // A conversation (JSON array of messages) through the model's chat template.
  ChatPrompt Chat(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& kwargs);

 private:
  std::string source_;  // where the tokenizer and template come from
  std::optional<text::Tokenizer> tokenizer_;
  std::optional<ChatTemplate> chat_template_;
};

}  // namespace dflash::app
