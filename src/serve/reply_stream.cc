#include "serve/reply_stream.h"

#include <algorithm>

namespace dflash::serve {

ReplyStream::ReplyStream(const text::Tokenizer& tokenizer, std::vector<int32_t> stop_tokens,
                         std::vector<std::string> stop, std::optional<OutputFormat> chat,
                         const std::string& forced_prefix)
    : decoder_(tokenizer), stop_tokens_(std::move(stop_tokens)), stop_(std::move(stop)) {
  if (chat) parser_.emplace(std::move(*chat));
  if (!forced_prefix.empty()) {
    text_ = forced_prefix;
    if (parser_) parser_->Push(forced_prefix);  // markup only: the parser holds it all back
  }
}

OutputDelta ReplyStream::Feed(const std::string& text, bool final) {
  text_ += text;
  OutputDelta d;
  if (parser_) {
    d = parser_->Push(text);
    if (final) {
      OutputDelta tail = parser_->Finish();
      d.content += tail.content;
      d.reasoning_content += tail.reasoning_content;
      if (d.tool_calls.empty()) d.first_tool_index = tail.first_tool_index;
      for (ToolCall& c : tail.tool_calls) d.tool_calls.push_back(std::move(c));
    }
  } else {
    d.content = text;
  }
  return d;
}

OutputDelta ReplyStream::Push(std::span<const int32_t> ids) {
  std::string text;
  for (int32_t id : ids) {
    if (stop_.stopped()) break;
    // The end-of-turn token ends generation; its text is not part of the reply.
    if (std::find(stop_tokens_.begin(), stop_tokens_.end(), id) != stop_tokens_.end()) continue;
    text += stop_.Push(decoder_.Push(id));
  }
  return Feed(text, false);
}

OutputDelta ReplyStream::Finish() {
  std::string text;
  if (!stop_.stopped()) text = stop_.Push(decoder_.Flush());
  text += stop_.Finish();
  return Feed(text, true);
}

}  // namespace dflash::serve
