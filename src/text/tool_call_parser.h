// The inside of one <tool_call>...</tool_call> block, in the two formats Qwen models emit:
//   Hermes JSON (Qwen2.5, Qwen3):   {"name": "get_weather", "arguments": {"location": "Paris"}}
//   XML (Qwen3-Coder, Qwen3.5):     <function=get_weather>
//                                   <parameter=location>
//                                   Paris
//                                   </parameter>
//                                   </function>
// into OpenAI tool calls, whose "arguments" is a JSON string.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dflash {

enum class ToolCallFormat {
  kNone,        // the model's tool calls are not parsed; everything is content
  kHermesJson,  // <tool_call>{"name": ..., "arguments": ...}</tool_call>
  kXml,         // <tool_call><function=NAME><parameter=P>V</parameter></function></tool_call>
};

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text, e.g. {"location": "Paris"}
};

// Parses one block body. `tools` (null or the request's tool schemas) types XML parameter
// values: a parameter declared "integer" becomes a JSON number, "string" stays text, and
// parameters without a schema stay text. Returns nullopt when the body is not a well-formed call.
std::optional<std::vector<ToolCall>> ParseToolCallBody(std::string_view body, ToolCallFormat format,
                                                       const nlohmann::ordered_json& tools);

}  // namespace dflash
