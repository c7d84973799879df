// A chat template's source (untrusted: it comes with a model download), parsed and rendered
// over a fixed conversation with and without tools. Output size, iterations and nesting must
// end in a clean Error, not in a hang, a huge allocation or a stack overflow.
#include "fuzz_support.h"
#include "golden_template.h"

using namespace dflash;
using OJson = nlohmann::ordered_json;

namespace {

// Every role, content parts, reasoning, a tool call and its result.
const OJson& Messages() {
  static const OJson m = OJson::parse(R"([
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": [{"type": "text", "text": "Weather in Oslo?"}, {"type": "image"}]},
    {"role": "assistant", "content": "Let me check.", "reasoning_content": "Call the tool.",
     "tool_calls": [{"id": "call_7", "type": "function",
                     "function": {"name": "get_weather", "arguments": {"location": "Oslo"}}}]},
    {"role": "tool", "tool_call_id": "call_7", "name": "get_weather", "content": "-3 C, snow"},
    {"role": "user", "content": "Thanks! \u00e9\u4f60"}])");
  return m;
}

const OJson& Tools() {
  static const OJson t = OJson::parse(R"([{"type": "function", "function": {"name": "get_weather",
    "description": "Get the weather.", "parameters": {"type": "object",
    "properties": {"location": {"type": "string"}}, "required": ["location"]}}}])");
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::ExpectCleanError([&] {
    const ChatTemplate t({{"default", std::string(fuzz::AsText(data, size))}},
                         OJson{{"bos_token", "<s>"}, {"eos_token", "</s>"}}, "fuzz.jinja");
    for (const OJson& tools : {OJson(), Tools()}) {
      fuzz::ExpectCleanError([&] {
        t.Render(Messages(), tools, /*add_generation_prompt=*/true, OJson{{"enable_thinking", false}}, fuzz::FixedClock());
      });
    }
  });
  return 0;
}
