// A conversation -> the exact prompt ids for the target and the format its reply will be parsed
// with. One place for what `generate --chat` and the server both do, so they cannot drift apart.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "text/chat_template.h"
#include "text/output_parser.h"
#include "text/tokenizer.h"

namespace dflash {

struct ChatPrompt {
  std::string text;           // the rendered template
  std::vector<int32_t> ids;   // text tokenized with special tokens recognised, no BOS added
  OutputFormat output;        // how to split the reply into content, reasoning and tool calls
};

// `messages`, `tools` (null or an array) and `kwargs` as in ChatTemplate::Render. Like
// transformers' apply_chat_template(tokenize=True), the template writes any BOS itself, so the
// tokenizer adds none.
ChatPrompt BuildChatPrompt(const ChatTemplate& chat_template, const text::Tokenizer& tokenizer,
                           const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                           const nlohmann::ordered_json& kwargs, bool add_generation_prompt = true);

}  // namespace dflash
