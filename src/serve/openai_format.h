// The JSON shapes of OpenAI responses: usage, llama.cpp-style timings (plus ours), chat and
// completion objects and their streamed chunks.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

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

}  // namespace dflash::serve
