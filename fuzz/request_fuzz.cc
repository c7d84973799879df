// A request body as the server takes it: ParseBody, then every API's parser on the same body
// (OpenAI's completions and chat completions, Anthropic's messages and count_tokens, OpenAI's
// responses; a clean ApiError is a 400), and each parsed chat request rendered with Qwen3's
// template as /apply-template does (a clean Error is what the server maps to 4xx). One body
// feeds them all: their fields overlap (messages, tools, tool_choice, stop), so a seed written
// for one API reaches the others' handling of the same values.
#include "fuzz_support.h"
#include "golden_template.h"
#include "serve/anthropic_format.h"
#include "serve/api_error.h"
#include "serve/request.h"
#include "serve/responses_format.h"

using namespace dflash;
using namespace dflash::serve;

namespace {

template <typename Parse>
void ParseAndRender(Parse&& parse) {
  fuzz::ExpectCleanError<ApiError>([&] {
    const ChatRequest r = parse();
    const bool use_tools = !r.tools.is_null() && r.tool_choice != ToolChoice::kNone;
    fuzz::ExpectCleanError([&] {
      fuzz::Qwen3Template().Render(r.messages, use_tools ? r.tools : OJson(), true, r.chat_template_kwargs,
                                   fuzz::FixedClock());
    });
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::ExpectCleanError<ApiError>([&] {
    const OJson body = ParseBody(std::string(fuzz::AsText(data, size)));
    fuzz::ExpectCleanError<ApiError>([&] { ParseCompletionRequest(body); });
    ParseAndRender([&] { return ParseChatRequest(body); });
    ParseAndRender([&] { return ParseAnthropicRequest(body); });
    ParseAndRender([&] { return ParseAnthropicRequest(body, /*count_tokens=*/true); });
    ParseAndRender([&] { return ParseResponsesRequest(body); });
  });
  return 0;
}
