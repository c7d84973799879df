// A request body as the server takes it: ParseBody, ParseChatRequest and
// ParseCompletionRequest (a clean ApiError is a 400), and a parsed chat request rendered with
// Qwen3's template as /apply-template does (a clean Error is what the server maps to 4xx).
#include "fuzz_support.h"
#include "golden_template.h"
#include "serve/api_error.h"
#include "serve/request.h"

using namespace dflash;
using namespace dflash::serve;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::ExpectCleanError<ApiError>([&] {
    const OJson body = ParseBody(std::string(fuzz::AsText(data, size)));
    fuzz::ExpectCleanError<ApiError>([&] { ParseCompletionRequest(body); });
    const ChatRequest r = ParseChatRequest(body);
    const bool use_tools = !r.tools.is_null() && r.tool_choice != ToolChoice::kNone;
    fuzz::ExpectCleanError([&] {
      fuzz::Qwen3Template().Render(r.messages, use_tools ? r.tools : OJson(), true, r.chat_template_kwargs,
                                   fuzz::FixedClock());
    });
  });
  return 0;
}
