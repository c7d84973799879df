#include "text/chat_prompt.h"

namespace dflash {

ChatPrompt BuildChatPrompt(const ChatTemplate& chat_template, const text::Tokenizer& tokenizer,
                           const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                           const nlohmann::ordered_json& kwargs, bool add_generation_prompt) {
  ChatPrompt p;
  p.text = chat_template.Render(messages, tools, add_generation_prompt, kwargs);
  p.ids = tokenizer.Encode(p.text, /*parse_special=*/true);
  const bool has_tools = tools.is_array() && !tools.empty();
  p.output = DetectOutputFormat(chat_template.Selected(!tools.is_null()).source(), p.text);
  if (has_tools) p.output.tools = tools;
  return p;
}

}  // namespace dflash
