// A model's raw completion -> the pieces of an OpenAI chat message: content, reasoning_content
// (<think>...</think>, also when the prompt already opened <think>) and tool_calls
// (<tool_call>...</tool_call> blocks, see tool_call_parser.h).
//
// The streaming parser emits deltas as text arrives and holds back only what could still turn
// out to be markup: a suffix that may be the start of a tag, the body of an open tool call, and
// whitespace that disappears if a tool call follows. When the stream ends mid-tag, the partial
// tag is dropped rather than shown. ParseOutput() is the same machine fed in one piece, so
// streamed deltas always add up to the non-streamed result.
//
// Whitespace follows what the Qwen templates add when they render a turn back: newlines around
// the reasoning are dropped, as are newlines between </think> and the content, and whitespace
// around tool calls (content on both sides of a call keeps the whitespace before it as the
// separator).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "text/tool_call_parser.h"

namespace dflash {

struct OutputFormat {
  bool reasoning = false;            // the model may open with <think>...</think>
  bool starts_in_reasoning = false;  // the prompt ends inside an open <think>
  ToolCallFormat tool_calls = ToolCallFormat::kNone;
  nlohmann::ordered_json tools;      // the request's tool schemas (types XML parameters); may be null
  std::string call_id_prefix = "call_";  // tool call ids are prefix + index; make it unique per request
};

// The format a chat template's model writes: reasoning if the template knows <think>, tool calls
// in the template's own syntax, and whether `prompt` (the rendered prompt) left <think> open.
OutputFormat DetectOutputFormat(const std::string& template_source, const std::string& prompt);

struct ParsedOutput {
  std::string content;
  std::string reasoning_content;
  std::vector<ToolCall> tool_calls;
  // {"role": "assistant", "content": ..., "reasoning_content": ..., "tool_calls": [...]};
  // content is null when empty and there are tool calls, reasoning_content only when present.
  nlohmann::ordered_json ToMessage() const;
};

ParsedOutput ParseOutput(std::string_view text, const OutputFormat& format);

// What became certain since the last call.
struct OutputDelta {
  std::string content;
  std::string reasoning_content;
  std::vector<ToolCall> tool_calls;  // complete calls; their index is their position overall
  size_t first_tool_index = 0;       // overall index of tool_calls[0]
  bool empty() const { return content.empty() && reasoning_content.empty() && tool_calls.empty(); }
};

class OutputStreamParser {
 public:
  explicit OutputStreamParser(OutputFormat format);
  OutputDelta Push(std::string_view text);
  OutputDelta Finish();  // end of generation; after this, Push is an error

 private:
  enum class Mode { kStart, kReasoning, kContent, kToolCall };
  void Run(OutputDelta& out, bool final);
  void EmitReasoning(OutputDelta& out, std::string_view text);
  void EmitContent(OutputDelta& out, std::string_view text);
  void EmitToolBlock(OutputDelta& out, std::string_view body, bool closed);

  OutputFormat format_;
  Mode mode_;
  std::string buf_;             // received, not yet classified
  std::string held_newlines_;   // reasoning's trailing newlines, dropped if </think> follows
  std::string held_space_;      // content's trailing whitespace, dropped if a tool call follows
  bool reasoning_started_ = false;  // past the leading newlines of the reasoning
  bool after_think_ = false;        // content just after </think>: leading newlines go
  bool after_tool_ = false;         // content just after a tool call: leading whitespace goes
  bool content_started_ = false;    // some content has been emitted
  size_t tool_count_ = 0;
  bool finished_ = false;
};

}  // namespace dflash
