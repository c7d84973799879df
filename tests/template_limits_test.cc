// Hostile templates and request bodies (issue 36): each input here once crashed the process by
// stack overflow, looped for ever or tried to allocate without bound. Now each must end in a
// dflash::Error that names the limit it ran into (text/jinja/limits.h), quickly.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "serve/api_error.h"
#include "serve/request.h"
#include "text/chat_template.h"
#include "text/jinja/template.h"
#include "text/jinja/value.h"

namespace dflash {
namespace {

using OJson = nlohmann::ordered_json;

// The error a render of `source` raises, or "(rendered) OUTPUT" when it raises none.
std::string Outcome(const std::string& source, const OJson& vars = OJson::object()) {
  try {
    return "(rendered) " + jinja::Template(source, "t.jinja").Render(vars);
  } catch (const Error& e) {
    return e.what();
  }
}

// JSON text of `levels` nested arrays, "[[[...]]]", or objects, {"a":{"a":...{}}}.
std::string NestedArrayText(int levels) { return std::string(levels, '[') + std::string(levels, ']'); }
std::string NestedObjectText(int levels) {
  std::string text;
  for (int i = 0; i < levels; ++i) text += "{\"a\":";
  return text + "{}" + std::string(levels, '}');
}

// Deep documents are only ever parsed from text here: nlohmann parses and destroys without
// recursion, but copying one (an initializer list does) would overflow the test's own stack.
OJson NestedArrays(int levels) { return OJson::parse(NestedArrayText(levels)); }

std::string Repeated(const std::string& piece, int times) {
  std::string out;
  for (int i = 0; i < times; ++i) out += piece;
  return out;
}

#define EXPECT_MENTIONS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

const ChatTemplate& EchoTemplate() {
  static const ChatTemplate t({{"default", "{% for m in messages %}{{ m.content }}{% endfor %}{{ tools }}{{ extra }}"}},
                              OJson::object(), "echo.jinja");
  return t;
}

std::string ChatOutcome(const OJson& messages, const OJson& tools, const OJson& kwargs) {
  try {
    return "(rendered) " + EchoTemplate().Render(messages, tools, true, kwargs);
  } catch (const Error& e) {
    return e.what();
  }
}

// 15,000 levels (a 30 KB body) overflowed the stack in Value::FromJson, 100,000 in the copy of the
// request inside ChatTemplate::RenderWith; both sit before any template code runs.
TEST(TemplateLimits, DeeplyNestedRequestJsonIsAnErrorNamingTheField) {
  const std::string user = R"({"role": "user", "content": "hi"})";
  for (const int levels : {15'000, 100'000}) {
    const std::string arrays = NestedArrayText(levels), objects = NestedObjectText(levels);
    const OJson content = OJson::parse(R"([{"role": "user", "content": )" + arrays + "}]");
    EXPECT_MENTIONS(ChatOutcome(content, nullptr, OJson::object()), "echo.jinja: messages: JSON nested more than 512 levels deep");

    const OJson call = OJson::parse("[" + user + R"(, {"role": "assistant", "tool_calls": [{"type": "function",
        "function": {"name": "f", "arguments": )" + objects + "}}]}]");
    EXPECT_MENTIONS(ChatOutcome(call, nullptr, OJson::object()), "messages: JSON nested more than 512");

    const OJson tools = OJson::parse(R"([{"type": "function", "function": {"name": "f", "parameters": )" + objects + "}}]");
    EXPECT_MENTIONS(ChatOutcome(OJson::parse("[" + user + "]"), tools, OJson::object()), "tools: JSON nested more than 512");
    const OJson kwargs = OJson::parse(R"({"extra": )" + arrays + "}");
    EXPECT_MENTIONS(ChatOutcome(OJson::parse("[" + user + "]"), nullptr, kwargs), "template kwargs: JSON nested more than 512");

    EXPECT_MENTIONS(Outcome("{{ x }}", OJson::parse(R"({"x": )" + arrays + "}")), "template variable 'x': JSON nested more than 512");
    try {
      jinja::Value::FromJson(OJson::parse(arrays));
      ADD_FAILURE() << "FromJson accepted " << levels << " levels";
    } catch (const Error& e) {
      EXPECT_MENTIONS(std::string(e.what()), "nested more than 512");
    }
  }
}

// The server's request parsing copies messages, tools and kwargs before any template sees them;
// 100,000 levels (a 200 KB body, under the 8 MiB limit) overflowed the stack there. The Error
// is what the server's routes answer with 400.
TEST(TemplateLimits, DeeplyNestedRequestBodyIsAnErrorBeforeItIsCopied) {
  const std::string deep = NestedArrayText(100'000);
  const std::string user = R"({"role": "user", "content": "hi"})";
  try {
    serve::ParseChatRequest(serve::ParseBody(R"({"messages": [)" + user + R"(], "chat_template_kwargs": {"x": )" + deep + "}}"));
    ADD_FAILURE() << "a 100,000-deep body was accepted";
  } catch (const serve::ApiError& e) {  // a 400, as for any other bad field
    EXPECT_EQ(e.status(), 400);
    EXPECT_MENTIONS(std::string(e.what()), "the request body: JSON nested more than 512 levels deep");
  }
  // Tool-call arguments arrive as a JSON string, parsed (and then copied) on their own.
  const std::string escaped = Repeated(R"({\"a\":)", 100'000) + "{}" + std::string(100'000, '}');
  const std::string call = R"({"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": ")" +
                           escaped + R"("}}]})";
  try {
    serve::ParseChatRequest(serve::ParseBody(R"({"messages": [)" + user + ", " + call + "]}"));
    ADD_FAILURE() << "100,000-deep tool-call arguments were accepted";
  } catch (const serve::ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_MENTIONS(std::string(e.what()), "'messages[1].tool_calls[0].function.arguments': JSON nested more than 512");
  }
}

TEST(TemplateLimits, JsonUpToTheDepthLimitStillRenders) {
  // The variable itself is level 1, so 512 levels of arrays is the deepest accepted.
  EXPECT_EQ(Outcome("{{ x|length }}", OJson{{"x", NestedArrays(512)}}), "(rendered) 1");
  EXPECT_MENTIONS(Outcome("{{ x|length }}", OJson{{"x", NestedArrays(513)}}), "nested more than 512");
}

// A template building a 100,000-deep value crashed repr, == and the value's destructor.
TEST(TemplateLimits, TemplateBuiltValuesCannotNestPastTheLimit) {
  const std::string wrap = "{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x }}";
  EXPECT_MENTIONS(Outcome(wrap), "t.jinja:1: a list nested more than 512 levels deep");
  const std::string dicts = "{% set ns = namespace(x={}) %}{% for i in range(100000) %}{% set ns.x = {'a': ns.x} %}{% endfor %}";
  EXPECT_MENTIONS(Outcome(dicts), "a dict nested more than 512 levels deep");
  EXPECT_MENTIONS(Outcome("{{ x + [x] }}", OJson{{"x", NestedArrays(512)}}), "a list nested more than 512 levels deep");
}

// A namespace holding itself made repr and == recurse for ever.
TEST(TemplateLimits, NamespacesCannotHoldNamespaces) {
  EXPECT_MENTIONS(Outcome("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}"), "cannot store a namespace in namespace attribute 'me'");
  EXPECT_MENTIONS(Outcome("{% set ns = namespace() %}{% set ns.l = [{'a': ns}] %}{{ ns }}"), "cannot store a namespace");
  EXPECT_MENTIONS(Outcome("{% set a = namespace() %}{% set b = namespace(inner=a) %}"), "cannot store a namespace");
  EXPECT_EQ(Outcome("{% set ns = namespace(l=[]) %}{% set ns.l = ns.l + [1] %}{{ ns.l }}"), "(rendered) [1]");
}

// '' * 10**18 spun 10**18 times; 'abcd' * 2**62 overflowed past the old 10M guard.
TEST(TemplateLimits, RepetitionIsCheckedBeforeItIsBuilt) {
  EXPECT_EQ(Outcome("{{ '' * 10**18 }}|{{ ([] * 10**18)|length }}"), "(rendered) |0");
  EXPECT_MENTIONS(Outcome("{{ 'abcd' * 4611686018427387904 }}"), "string repetition (bytes) too large");
  EXPECT_MENTIONS(Outcome("{{ ([1, 2] * 4611686018427387904)|length }}"), "list repetition (items) too large");
  EXPECT_MENTIONS(Outcome("{{ 'x' * 40000000 }}"), "string repetition (bytes) too large");
  EXPECT_EQ(Outcome("{{ 'ab' * 3 }}{{ [0] * 2 }}"), "(rendered) ababab[0, 0]");
}

// center/ljust of 10**12 appended one character at a time.
TEST(TemplateLimits, PaddingIsCheckedBeforeItIsBuilt) {
  for (const char* method : {"center", "ljust", "rjust"}) {
    EXPECT_MENTIONS(Outcome(std::string("{{ 'x'.") + method + "(10**12) }}"), "padding (bytes) too large");
  }
  EXPECT_MENTIONS(Outcome("{{ 'x'|center(10**12) }}"), "padding (bytes) too large");
  EXPECT_MENTIONS(Outcome("{{ '7'.zfill(10**12) }}"), "zfill padding (bytes) too large");
  EXPECT_MENTIONS(Outcome("{{ 'a\nb'|indent(10**12) }}"), "indent width too large");
  EXPECT_MENTIONS(Outcome("{{ [1]|tojson(indent=10**12) }}"), "tojson indent too large");
  EXPECT_MENTIONS(Outcome("{{ [1]|batch(10**12, 0)|list }}"), "filter 'batch' linecount too large");
  EXPECT_EQ(Outcome("{{ 'ab'.center(6, '*') }}{{ '7'.zfill(3) }}"), "(rendered) **ab**007");
}

// Joining, replacing and formatting multiply their input; each stops at the string limit.
TEST(TemplateLimits, StringsStopAtTheTextLimit) {
  const std::string big = "{% set s = 'x' * 1000000 %}";
  EXPECT_MENTIONS(Outcome(big + "{{ s.replace('', 'yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy') }}"), "would grow past 32 MiB");
  EXPECT_MENTIONS(Outcome(big + "{{ ([s] * 100)|join(',') }}"), "would grow past 32 MiB");
  EXPECT_MENTIONS(Outcome(big + "{{ ','.join([s] * 100) }}"), "would grow past 32 MiB");
  EXPECT_MENTIONS(Outcome(big + "{{ ('{0}' * 100).format(s) }}"), "would grow past 32 MiB");
  EXPECT_MENTIONS(Outcome(big + "{{ [s] * 100 }}"), "would grow past 32 MiB");
  EXPECT_MENTIONS(Outcome(big + "{{ ([s] * 100)|tojson }}"), "tojson: output would grow past 32 MiB");
  EXPECT_MENTIONS(Outcome(big + "{% set ns = namespace(s=s) %}{% for i in range(10) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}"),
                  "would grow past 32 MiB");
  EXPECT_MENTIONS(Outcome("{% for c in 'x' * 2000000 %}{% endfor %}"), "cannot iterate over a string of 2000000 characters");
}

TEST(TemplateLimits, OutputStopsAtTheTextLimit) {
  EXPECT_MENTIONS(Outcome("{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}"), "t.jinja:1: template text would grow past 32 MiB");
}

// Two nested range(100000) loops ran 10**10 iterations.
TEST(TemplateLimits, EndlessLoopsRunOutOfSteps) {
  EXPECT_MENTIONS(Outcome("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"),
                  "template render stopped after");
}

TEST(TemplateLimits, RecursionStopsAtTheDepthLimit) {
  EXPECT_MENTIONS(Outcome("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"), "macro calls nested too deeply");
  // Each call opens 150 statements: the nesting limit ends it before the macro-call limit does.
  const std::string body = Repeated("{% if true %}", 150) + "{{ f(n + 1) }}" + Repeated("{% endif %}", 150);
  EXPECT_MENTIONS(Outcome("{% macro f(n) %}" + body + "{% endmacro %}{{ f(0) }}"), "template render nested more than 1000 levels deep");
}

// Each of these chains grew an expression tree 100,000 levels tall, which overflowed the stack
// when it was evaluated or destroyed; brackets overflowed it while parsing.
TEST(TemplateLimits, DeepTemplateSyntaxIsRejectedWhenLoaded) {
  const int n = 100'000;
  const std::string cases[] = {
      "{{ " + std::string(n, '(') + "1" + std::string(n, ')') + " }}",
      "{{ " + std::string(n, '[') + std::string(n, ']') + " }}",
      "{{ " + Repeated("{'a': ", n) + "1" + std::string(n, '}') + " }}",
      "{{ x" + Repeated(".a", n) + " }}",
      "{{ x" + Repeated("[0]", n) + " }}",
      "{{ x" + Repeated("()", n) + " }}",
      "{{ x" + Repeated("[1:]", n) + " }}",
      "{{ x" + Repeated("|string", n) + " }}",
      "{{ x" + Repeated(" + x", n) + " }}",
      "{{ x" + Repeated(" * x", n) + " }}",
      "{{ x" + Repeated(" ** x", n) + " }}",
      "{{ x" + Repeated(" and x", n) + " }}",
      "{{ x" + Repeated(" or x", n) + " }}",
      "{{ x" + Repeated(" if x", n) + " }}",
      "{{ " + Repeated("not ", n) + "x }}",
      "{{ " + Repeated("- ", n) + "x }}",
      "{% set " + std::string(n, '(') + "a" + std::string(n, ')') + " = 1 %}",
  };
  for (const std::string& source : cases) {
    try {
      jinja::Template(source, "t.jinja");
      ADD_FAILURE() << "loaded " << source.substr(0, 40) << "...";
    } catch (const Error& e) {
      EXPECT_MENTIONS(std::string(e.what()), "nested too deeply (more than 200 levels)");
    }
  }
}

TEST(TemplateLimits, ChainsWithinTheLimitStillRender) {
  EXPECT_EQ(Outcome("{{ 1" + Repeated(" + 1", 150) + " }}"), "(rendered) 151");
  EXPECT_EQ(Outcome("{{ x" + Repeated("[0]", 150) + " }}", OJson{{"x", NestedArrays(151)}}), "(rendered) []");
}

}  // namespace
}  // namespace dflash
