// OpenAI request bodies -> typed requests. Every field we read is type-checked and range-checked
// here (errors name the field: 400 invalid_request_error with "param"); unknown fields are
// ignored, as OpenAI-compatible servers do; sampling and output fields we do not implement
// (logit_bias, logprobs, n > 1, typical_p, ...) are rejected when set to anything but their
// no-op value, never silently dropped.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "spec/sampler.h"

namespace dflash::serve {

using OJson = nlohmann::ordered_json;

// What both endpoints share.
struct GenerationRequest {
  std::string model;                  // empty when not given
  bool stream = false;
  bool include_usage = false;         // stream_options.include_usage
  std::optional<int> max_tokens;      // max_completion_tokens or max_tokens
  std::optional<double> temperature, top_p, min_p;
  // OpenAI's presence_penalty and frequency_penalty in [-2, 2]; repetition_penalty > 0
  // (transformers' and vLLM's name; llama.cpp's repeat_penalty is the same): spec/penalties.h.
  std::optional<double> presence_penalty, frequency_penalty, repetition_penalty;
  std::optional<SpecSampling> spec_sampling;  // "rejection" | "reproducible" (spec/sampler.h)
  std::optional<int> top_k;
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;      // stop strings (at most 4, none empty)
  bool ignore_eos = false;            // llama.cpp's extension: generate past end-of-turn tokens
  std::optional<std::string> scripted_output;  // test double, see ServerOptions::allow_scripted_output
};

enum class ToolChoice { kAuto, kNone, kRequired, kNamed };

struct ChatRequest : GenerationRequest {
  OJson messages;                     // array of {"role", "content", ...}; content parts joined to text
  OJson tools;                        // null or a non-empty array of {"type": "function", "function": {...}}
  ToolChoice tool_choice = ToolChoice::kAuto;
  std::string tool_name;              // kNamed
  OJson chat_template_kwargs = OJson::object();
};

struct CompletionRequest : GenerationRequest {
  std::optional<std::string> prompt_text;
  std::vector<int32_t> prompt_ids;    // when the prompt is given as token ids
};

// Both throw ApiError.
ChatRequest ParseChatRequest(const OJson& body);
CompletionRequest ParseCompletionRequest(const OJson& body);

// The body as JSON; ApiError 400 when it is not a JSON object.
OJson ParseBody(const std::string& body);

}  // namespace dflash::serve
