// JSON -> template values: the input (any JSON) is the `messages` of a render, through
// Qwen3's chat template and through one that walks any value (print, tojson, compare,
// iterate). Deep nesting and big values must end in a clean Error.
#include "fuzz_support.h"
#include "golden_template.h"

using namespace dflash;
using OJson = nlohmann::ordered_json;

namespace {

const ChatTemplate& WalkTemplate() {
  static const ChatTemplate t(
      {{"default",
        "{{ messages }}{{ messages | tojson }}{{ messages == messages }}{{ messages | length }}"
        "{% for m in messages %}{{ m }}{{ m | string | length }}{% if m is mapping %}"
        "{{ m.role }}{{ m.content }}{% endif %}{% endfor %}"}},
      OJson::object(), "walk.jinja");
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  OJson messages;
  try {
    messages = OJson::parse(fuzz::AsText(data, size));
  } catch (const OJson::exception&) {
    return 0;  // not JSON: nothing reaches the template engine
  }
  for (const ChatTemplate* t : {&fuzz::Qwen3Template(), &WalkTemplate()}) {
    fuzz::ExpectCleanError([&] { t->Render(messages, OJson(), true, OJson::object(), fuzz::FixedClock()); });
  }
  return 0;
}
