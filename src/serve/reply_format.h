// One API's shapes for a generated reply: the whole reply as one JSON body, or the same reply as
// server-sent events while it is generated. The server runs every API's requests the same way
// (one request model, one template rendering, one output parser) and hands the result to the
// request's ReplyFormat: OpenAI chat and completions (openai_format.h), Anthropic Messages
// (anthropic_format.h), OpenAI Responses (responses_format.h).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "serve/api_error.h"
#include "spec/generate.h"
#include "text/output_parser.h"

namespace dflash::serve {

using OJson = nlohmann::ordered_json;

// A finished generation, as every API reports it.
struct FinishedReply {
  const ParsedOutput& parsed;        // the whole reply (completions: content only)
  FinishReason finish_reason;        // kToolCalls when it stopped after tool calls
  const std::string& stop_sequence;  // the request's stop sequence that ended it, or empty
  const GenerateStats& stats;
  const std::string& mode;           // dflash | ar | scripted
};

// One server-sent event; an empty name writes no "event:" line (OpenAI chat and completions).
struct SseEvent {
  std::string name;
  OJson data;
};
using SseEvents = std::vector<SseEvent>;

class ReplyFormat {
 public:
  virtual ~ReplyFormat() = default;

  virtual OJson Reply(const FinishedReply& r) const = 0;
  virtual OJson ErrorBody(const ApiError& e) const { return e.Body(); }

  // A stream: Start before generation, Delta for each piece of the reply shown, then End (or
  // Error, when the generation failed). The deltas add up to Reply's content.
  virtual void Start(SseEvents& out) = 0;
  virtual void Delta(const OutputDelta& d, SseEvents& out) = 0;
  virtual void End(const FinishedReply& r, SseEvents& out) = 0;
  virtual void Error(const ApiError& e, SseEvents& out) { out.push_back({"", ErrorBody(e)}); }
  // OpenAI chat and completions streams end with "data: [DONE]".
  virtual bool ends_with_done() const { return false; }
};

}  // namespace dflash::serve
