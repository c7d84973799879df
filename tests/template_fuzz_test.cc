// Bad input must end in dflash::Error, never a crash or another exception: mutated copies of the
// shipped templates (and of their inputs) through the Jinja engine, and random fragments of
// markup through the output parser.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "core/error.h"
#include "text/chat_template.h"
#include "text/jinja/template.h"
#include "text/output_parser.h"

namespace dflash {
namespace {

namespace fs = std::filesystem;
using OJson = nlohmann::ordered_json;

// Third-party tokenizers and chat templates vendored for the tests (see tests/data/NOTICE.md).
std::string DataDir() { return std::string(DFLASH_SOURCE_DIR) + "/tests/data"; }

OJson Cases() {
  std::ifstream in(std::string(DFLASH_SOURCE_DIR) + "/tests/goldens/templates/cases.json");
  return OJson::parse(in)["cases"];
}

const char* const kFragments[] = {"{{", "}}", "{%", "%}", "{#", "#}", "-", "+", "(", ")", "[", "]", "{", "}",
                                  "'", "\"", "|", ".", ",", ":", "=", "~", "*", "**", "//", "\\", "\n", " ",
                                  "if", "endif", "for", "endfor", "else", "set", "macro", "endmacro", "in",
                                  "not", "is", "none", "loop", "x", "0", "1e9", "9223372036854775807",
                                  "\xc3\xa9", "\xff"};

std::string Mutate(std::string s, std::mt19937& rng) {
  const int edits = 1 + rng() % 4;
  for (int e = 0; e < edits && !s.empty(); ++e) {
    const size_t at = rng() % s.size();
    switch (rng() % 3) {
      case 0: s.erase(at, 1 + rng() % 6); break;
      case 1: s.insert(at, kFragments[rng() % std::size(kFragments)]); break;
      default: s.insert(at, s.substr(rng() % s.size(), 1 + rng() % 12)); break;
    }
  }
  return s;
}

// Runs `f`; only success or dflash::Error are acceptable outcomes.
template <typename F>
void ExpectCleanOutcome(F&& f, const std::string& what) {
  try {
    f();
  } catch (const Error&) {
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": escaped as " << typeid(e).name() << ": " << e.what();
  }
}

TEST(TemplateFuzz, MutatedShippedTemplatesFailCleanly) {
  const fs::path dir = fs::path(DataDir()) / "templates";
  const OJson cases = Cases();
  std::mt19937 rng(1234);
  int parsed = 0, rendered = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string source = ss.str();
    for (int i = 0; i < 150; ++i) {
      const std::string mutated = Mutate(source, rng);
      ExpectCleanOutcome(
          [&] {
            const ChatTemplate t({{"default", mutated}}, OJson{{"bos_token", "<s>"}}, entry.path().filename().string());
            ++parsed;
            for (const char* name : {"tool_call_with_content", "parallel_tool_calls", "content_parts"}) {
              const OJson& c = cases[name];
              ExpectCleanOutcome([&] { t.Render(c["messages"], c.value("tools", OJson()), true); ++rendered; },
                                 entry.path().string() + " mutation " + std::to_string(i));
            }
          },
          entry.path().string() + " mutation " + std::to_string(i));
    }
  }
  EXPECT_GT(parsed, 50);  // the mutations must not all be rejected by the lexer
  EXPECT_GT(rendered, 20);
}

// Well-formed templates over malformed conversations: wrong types where strings are expected.
TEST(TemplateFuzz, OddlyTypedMessagesFailCleanly) {
  const fs::path dir = fs::path(DataDir()) / "templates";
  const OJson odd_values = OJson::parse(R"([null, 1, -2.5, true, [], {}, [1, {"a": null}], {"role": 1}, "", "x"])");
  std::mt19937 rng(99);
  const OJson cases = Cases();
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    const ChatTemplate t({{"default", ss.str()}}, OJson::object(), entry.path().filename().string());
    for (int i = 0; i < 100; ++i) {
      OJson c = cases["tool_call_with_content"];
      OJson& m = c["messages"][rng() % c["messages"].size()];
      const char* fields[] = {"role", "content", "tool_calls", "reasoning_content", "name"};
      m[fields[rng() % std::size(fields)]] = odd_values[rng() % odd_values.size()];
      if (rng() % 3 == 0) c["tools"][0]["function"]["parameters"] = odd_values[rng() % odd_values.size()];
      ExpectCleanOutcome([&] { t.Render(c["messages"], c["tools"], rng() % 2); }, entry.path().string());
    }
  }
}

TEST(OutputParserFuzz, RandomMarkupKeepsStreamingConsistent) {
  const char* const pieces[] = {"<think>", "</think>", "<tool_call>", "</tool_call>", "<function=", "</function>",
                                "<parameter=", "</parameter>", "<", ">", "/", "=", "{", "}", "\"", ":", ",",
                                "name", "arguments", "\n", " ", "x", "7", "[", "]", "\xe2\x82\xac", "\xff"};
  std::mt19937 rng(7);
  for (int i = 0; i < 400; ++i) {
    std::string text;
    const int n = rng() % 40;
    for (int k = 0; k < n; ++k) text += pieces[rng() % std::size(pieces)];
    OutputFormat f;
    f.reasoning = rng() % 2;
    f.starts_in_reasoning = f.reasoning && rng() % 2;
    f.tool_calls = static_cast<ToolCallFormat>(rng() % 3);
    const ParsedOutput whole = ParseOutput(text, f);
    OutputStreamParser parser(f);
    std::string content, reasoning;
    size_t calls = 0;
    for (size_t pos = 0; pos < text.size();) {
      const size_t len = 1 + rng() % 5;
      const OutputDelta d = parser.Push(text.substr(pos, len));
      content += d.content;
      reasoning += d.reasoning_content;
      calls += d.tool_calls.size();
      pos += len;
    }
    const OutputDelta d = parser.Finish();
    EXPECT_EQ(content + d.content, whole.content) << text;
    EXPECT_EQ(reasoning + d.reasoning_content, whole.reasoning_content) << text;
    EXPECT_EQ(calls + d.tool_calls.size(), whole.tool_calls.size()) << text;
  }
}

}  // namespace
}  // namespace dflash
