// OpenAI's Responses API (POST /v1/responses), the stateless subset agents use, over the server's
// one request model: `instructions` and `input` items (messages, function_call,
// function_call_output, reasoning) become a ChatRequest; replies are response objects whose
// `output` holds reasoning, message and function_call items, streamed as response.* events.
// Nothing is stored: `previous_response_id` (and `conversation`) are refused with a 400 that
// says so; `store`, `include`, `prompt_cache_key`, `metadata`, ... are accepted and ignored.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "serve/openai_format.h"
#include "serve/reply_blocks.h"
#include "serve/reply_format.h"
#include "serve/request.h"

namespace dflash::serve {

// Throws ApiError. `reasoning.effort` becomes the template's reasoning_effort variable
// (templates without one ignore it).
ChatRequest ParseResponsesRequest(const OJson& body);

class ResponsesReplyFormat final : public ReplyFormat {
 public:
  // header.id is the response id ("resp_..."); output item ids are derived from it.
  explicit ResponsesReplyFormat(ResponseHeader header);
  OJson Reply(const FinishedReply& r) const override;
  void Start(SseEvents& out) override;
  void Delta(const OutputDelta& d, SseEvents& out) override;
  void End(const FinishedReply& r, SseEvents& out) override;
  void Error(const ApiError& e, SseEvents& out) override;

 private:
  class Events;
  OJson Response(OJson output, const FinishedReply* r) const;  // r null: in progress
  void Add(SseEvents& out, const char* type, OJson event);

  ResponseHeader h_;
  std::string item_tag_;  // what item ids share: the response id without "resp_"
  BlockSequencer blocks_;
  OJson done_items_ = OJson::array();
  int sequence_ = 0;
};

}  // namespace dflash::serve
