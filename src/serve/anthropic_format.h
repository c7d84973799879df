// Anthropic's Messages API (POST /v1/messages, /v1/messages/count_tokens) over the server's one
// request model: requests become a ChatRequest (system, messages with text / tool_use /
// tool_result / thinking blocks, tools with input_schema, tool_choice, thinking), replies and
// their event streams are made from the same generation result as every other API's.
// Fields that do not change generation (cache_control, metadata, service_tier, ...) are ignored.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "serve/api_error.h"
#include "serve/openai_format.h"
#include "serve/reply_blocks.h"
#include "serve/reply_format.h"
#include "serve/request.h"

namespace dflash::serve {

// Throws ApiError. `count_tokens`: the count_tokens body, which has no max_tokens.
// `thinking` becomes the template's enable_thinking switch (templates without one ignore it).
ChatRequest ParseAnthropicRequest(const OJson& body, bool count_tokens = false);

// {"type": "error", "error": {"type", "message"}}, the type from the HTTP status.
OJson AnthropicErrorBody(const ApiError& e);

// "end_turn", "max_tokens", "stop_sequence" (a request's stop sequence ended it) or "tool_use".
const char* AnthropicStopReason(FinishReason r, const std::string& stop_sequence);

class AnthropicReplyFormat final : public ReplyFormat {
 public:
  // header.id is the message id; `prompt_tokens` is what message_start reports before the
  // prefix cache is consulted (message_delta's usage has the final split).
  AnthropicReplyFormat(ResponseHeader header, int prompt_tokens) : h_(std::move(header)), prompt_tokens_(prompt_tokens) {}
  OJson Reply(const FinishedReply& r) const override;
  OJson ErrorBody(const ApiError& e) const override { return AnthropicErrorBody(e); }
  void Start(SseEvents& out) override;
  void Delta(const OutputDelta& d, SseEvents& out) override;
  void End(const FinishedReply& r, SseEvents& out) override;
  void Error(const ApiError& e, SseEvents& out) override { out.push_back({"error", ErrorBody(e)}); }

 private:
  class Events;
  ResponseHeader h_;
  int prompt_tokens_;
  BlockSequencer blocks_;
};

}  // namespace dflash::serve
