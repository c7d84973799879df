// The JSON shapes of OpenAI responses: usage, llama.cpp-style timings (plus ours), chat and
// completion objects and their streamed chunks (ReplyFormat for /v1/chat/completions and
// /v1/completions).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "serve/reply_format.h"
#include "spec/generate.h"
#include "text/output_parser.h"

namespace dflash::serve {

using OJson = nlohmann::ordered_json;

// {"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details": {"cached_tokens"}}
OJson UsageJson(const GenerateStats& s);
// llama.cpp's names (prompt_n = prefilled, cache_n = reused, predicted_* = decode after the
// first token) and ours (tokens_per_cycle, acceptance, cycles, mode).
OJson TimingsJson(const GenerateStats& s, const std::string& mode);

// The fixed part of a response object: id, object, created, model.
struct ResponseHeader {
  std::string id;
  std::string object;  // chat.completion | text_completion
  int64_t created = 0;
  std::string model;
  OJson Json(const char* object_override = nullptr) const;
};

// A streamed chat delta ({"content"}, {"reasoning_content"}, {"tool_calls": [...]}) as one
// chunk; empty deltas give null.
OJson ChatDeltaChunk(const ResponseHeader& h, const OutputDelta& d);
OJson ToolCallsJson(const std::vector<ToolCall>& calls, size_t first_index, bool with_index);

// chat.completion (`chat`) or text_completion replies; streams of chunks ending in [DONE], the
// last with finish_reason and timings, usage there or (include_usage) in a chunk of its own.
class OpenAIReplyFormat final : public ReplyFormat {
 public:
  OpenAIReplyFormat(ResponseHeader header, bool chat, bool include_usage)
      : h_(std::move(header)), chat_(chat), include_usage_(include_usage) {}
  OJson Reply(const FinishedReply& r) const override;
  void Start(SseEvents& out) override;
  void Delta(const OutputDelta& d, SseEvents& out) override;
  void End(const FinishedReply& r, SseEvents& out) override;
  bool ends_with_done() const override { return true; }

 private:
  ResponseHeader h_;
  bool chat_, include_usage_;
};

}  // namespace dflash::serve
