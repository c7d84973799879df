// Output parsing: reasoning, content and tool calls out of raw completions, streamed and not,
// and round trips through the shipped chat templates.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "text/chat_template.h"
#include "text/output_parser.h"

namespace dflash {
namespace {

namespace fs = std::filesystem;
using OJson = nlohmann::ordered_json;

OutputFormat Format(bool reasoning, ToolCallFormat tools, bool starts_in_reasoning = false) {
  OutputFormat f;
  f.reasoning = reasoning;
  f.tool_calls = tools;
  f.starts_in_reasoning = starts_in_reasoning;
  return f;
}

const OJson kTools = OJson::parse(R"([{"type": "function", "function": {"name": "get_weather", "parameters": {
  "type": "object", "properties": {"location": {"type": "string"}, "days": {"type": "integer"},
  "metric": {"type": "boolean"}, "score": {"type": "number"}, "tags": {"type": "array"},
  "zip": {"type": "string"}}}}}])");

TEST(OutputParser, QwenThinkingThenHermesToolCall) {
  const ParsedOutput p = ParseOutput(
      "<think>\nThe user wants weather.\nCall the tool.\n</think>\n\n<tool_call>\n"
      "{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\", \"unit\": \"celsius\"}}\n</tool_call>",
      Format(true, ToolCallFormat::kHermesJson));
  EXPECT_EQ(p.reasoning_content, "The user wants weather.\nCall the tool.");
  EXPECT_EQ(p.content, "");
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_EQ(p.tool_calls[0].id, "call_0");
  EXPECT_EQ(p.tool_calls[0].name, "get_weather");
  EXPECT_EQ(p.tool_calls[0].arguments, R"({"location": "Paris", "unit": "celsius"})");
  EXPECT_EQ(p.ToMessage().dump(),
            R"({"role":"assistant","content":null,"reasoning_content":"The user wants weather.\nCall the tool.",)"
            R"("tool_calls":[{"id":"call_0","type":"function","function":{"name":"get_weather",)"
            R"("arguments":"{\"location\": \"Paris\", \"unit\": \"celsius\"}"}}]})");
}

TEST(OutputParser, ContentBeforeSeveralToolCalls) {
  OutputFormat f = Format(false, ToolCallFormat::kHermesJson);
  f.call_id_prefix = "call_req7_";
  const ParsedOutput p = ParseOutput(
      "Let me check both.\n\n<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"b\", \"arguments\": \"{\\\"raw\\\": 1}\"}\n</tool_call>\n",
      f);
  EXPECT_EQ(p.content, "Let me check both.");
  ASSERT_EQ(p.tool_calls.size(), 2u);
  EXPECT_EQ(p.tool_calls[0].id, "call_req7_0");
  EXPECT_EQ(p.tool_calls[0].arguments, "{}");
  EXPECT_EQ(p.tool_calls[1].id, "call_req7_1");
  EXPECT_EQ(p.tool_calls[1].arguments, R"({"raw": 1})");  // a string stays as the model wrote it
}

TEST(OutputParser, PromptOpenedThink) {
  const OutputFormat f = Format(true, ToolCallFormat::kXml, /*starts_in_reasoning=*/true);
  ParsedOutput p = ParseOutput("Short reasoning.\n</think>\n\nThe answer is 4.", f);
  EXPECT_EQ(p.reasoning_content, "Short reasoning.");
  EXPECT_EQ(p.content, "The answer is 4.");
  p = ParseOutput("Still thinking when the limit hit", f);
  EXPECT_EQ(p.reasoning_content, "Still thinking when the limit hit");
  EXPECT_EQ(p.content, "");
}

TEST(OutputParser, ThinkOnlyCountsWhereTheFormatSaysSo) {
  ParsedOutput p = ParseOutput("<think>x</think>y", Format(false, ToolCallFormat::kNone));
  EXPECT_EQ(p.content, "<think>x</think>y");
  p = ParseOutput("Answer first <think>not reasoning</think>", Format(true, ToolCallFormat::kNone));
  EXPECT_EQ(p.content, "Answer first <think>not reasoning</think>");
  EXPECT_EQ(p.reasoning_content, "");
  p = ParseOutput("<tool_call>{\"name\": \"a\"}</tool_call>", Format(false, ToolCallFormat::kNone));
  EXPECT_EQ(p.content, "<tool_call>{\"name\": \"a\"}</tool_call>");
  EXPECT_TRUE(p.tool_calls.empty());
}

TEST(OutputParser, XmlParametersFollowTheSchema) {
  const std::string text =
      "I'll look.\n<tool_call>\n<function=get_weather>\n<parameter=location>\nSan Francisco, CA\n</parameter>\n"
      "<parameter=days>\n3\n</parameter>\n<parameter=metric>\nTrue\n</parameter>\n<parameter=score>\n2.5\n</parameter>\n"
      "<parameter=tags>\n[\"a\", 1]\n</parameter>\n<parameter=zip>\n02139\n</parameter>\n"
      "<parameter=note>\nline one\nline two\n</parameter>\n</function>\n</tool_call>";
  OutputFormat f = Format(false, ToolCallFormat::kXml);
  f.tools = kTools;
  ParsedOutput p = ParseOutput(text, f);
  EXPECT_EQ(p.content, "I'll look.");
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_EQ(p.tool_calls[0].name, "get_weather");
  EXPECT_EQ(p.tool_calls[0].arguments,
            R"({"location": "San Francisco, CA", "days": 3, "metric": true, "score": 2.5, "tags": ["a", 1], )"
            R"("zip": "02139", "note": "line one\nline two"})");
  f.tools = nullptr;  // without schemas every value stays text
  p = ParseOutput(text, f);
  EXPECT_EQ(p.tool_calls[0].arguments,
            R"({"location": "San Francisco, CA", "days": "3", "metric": "True", "score": "2.5", "tags": "[\"a\", 1]", )"
            R"("zip": "02139", "note": "line one\nline two"})");
}

TEST(OutputParser, MalformedAndCutOffToolCalls) {
  const OutputFormat f = Format(false, ToolCallFormat::kHermesJson);
  // A block that is not a call stays visible as text.
  ParsedOutput p = ParseOutput("<tool_call>\nnot json\n</tool_call>", f);
  EXPECT_EQ(p.content, "<tool_call>\nnot json\n</tool_call>");
  EXPECT_TRUE(p.tool_calls.empty());
  // Cut off after a complete JSON call: the call stands.
  p = ParseOutput("<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": 1}}\n", f);
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_EQ(p.tool_calls[0].arguments, R"({"x": 1})");
  // Cut off inside the call: the partial text is shown, not turned into a call.
  p = ParseOutput("<tool_call>\n{\"name\": \"a\", \"argu", f);
  EXPECT_EQ(p.content, "<tool_call>\n{\"name\": \"a\", \"argu");
  EXPECT_TRUE(p.tool_calls.empty());
  // XML cut off before </function> is not a call either.
  p = ParseOutput("<tool_call>\n<function=f>\n<parameter=x>\npart", Format(false, ToolCallFormat::kXml));
  EXPECT_TRUE(p.tool_calls.empty());
  EXPECT_EQ(p.content, "<tool_call>\n<function=f>\n<parameter=x>\npart");
}

TEST(OutputParser, StreamEndingMidTagDropsTheFragment) {
  EXPECT_EQ(ParseOutput("Hello<tool_ca", Format(false, ToolCallFormat::kHermesJson)).content, "Hello");
  EXPECT_EQ(ParseOutput("<thi", Format(true, ToolCallFormat::kNone)).content, "");
  const ParsedOutput p = ParseOutput("<think>abc\n</thi", Format(true, ToolCallFormat::kNone));
  EXPECT_EQ(p.reasoning_content, "abc");
  EXPECT_EQ(p.content, "");
  // Without tool parsing, '<' at the end is just text.
  EXPECT_EQ(ParseOutput("a <", Format(false, ToolCallFormat::kNone)).content, "a <");
}

TEST(OutputParser, StreamedDeltasNeverRetractAndAddUpToTheWhole) {
  const std::vector<std::pair<std::string, OutputFormat>> cases = {
      {"<think>\nStep 1.\n\nStep 2.\n</think>\n\nHere you go.\n\n<tool_call>\n{\"name\": \"f\", \"arguments\": "
       "{\"q\": \"<b> & </tool\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"g\", \"arguments\": {}}\n</tool_call>",
       Format(true, ToolCallFormat::kHermesJson)},
      {"reasoning < and </thin\n</think>\n\nx < y <tool_ and <tool_call>\n<function=get_weather>\n<parameter=days>\n"
       "7\n</parameter>\n</function>\n</tool_call> trailing text\n",
       [] {
         OutputFormat f = Format(true, ToolCallFormat::kXml, true);
         f.tools = kTools;
         return f;
       }()},
      {"  plain answer with spaces  \n", Format(true, ToolCallFormat::kHermesJson)},
      {"<tool_call>\nbroken</tool_call> after", Format(false, ToolCallFormat::kHermesJson)},
      {"ends mid tag <tool_cal", Format(false, ToolCallFormat::kHermesJson)},
  };
  for (const auto& [text, format] : cases) {
    const ParsedOutput whole = ParseOutput(text, format);
    // Every split into two chunks, and one character at a time.
    std::vector<std::vector<std::string>> splits;
    for (size_t cut = 0; cut <= text.size(); ++cut) splits.push_back({text.substr(0, cut), text.substr(cut)});
    std::vector<std::string> chars;
    for (char c : text) chars.emplace_back(1, c);
    splits.push_back(chars);
    for (const auto& chunks : splits) {
      OutputStreamParser parser(format);
      ParsedOutput streamed;
      auto add = [&](const OutputDelta& d) {
        EXPECT_EQ(d.first_tool_index, streamed.tool_calls.size());
        streamed.content += d.content;
        streamed.reasoning_content += d.reasoning_content;
        streamed.tool_calls.insert(streamed.tool_calls.end(), d.tool_calls.begin(), d.tool_calls.end());
        // What was sent is never taken back: it is always a prefix of the final answer.
        EXPECT_EQ(whole.content.rfind(streamed.content, 0), 0u) << text << "\nstreamed: " << streamed.content;
        EXPECT_EQ(whole.reasoning_content.rfind(streamed.reasoning_content, 0), 0u) << text;
      };
      for (const std::string& c : chunks) add(parser.Push(c));
      add(parser.Finish());
      EXPECT_EQ(streamed.content, whole.content) << text;
      EXPECT_EQ(streamed.reasoning_content, whole.reasoning_content) << text;
      ASSERT_EQ(streamed.tool_calls.size(), whole.tool_calls.size()) << text;
      for (size_t i = 0; i < whole.tool_calls.size(); ++i) {
        EXPECT_EQ(streamed.tool_calls[i].id, whole.tool_calls[i].id);
        EXPECT_EQ(streamed.tool_calls[i].arguments, whole.tool_calls[i].arguments);
      }
    }
  }
  // Spot-check the second case's meaning.
  OutputFormat f = Format(true, ToolCallFormat::kXml, true);
  f.tools = kTools;
  const ParsedOutput p = ParseOutput(cases[1].first, f);
  EXPECT_EQ(p.reasoning_content, "reasoning < and </thin");
  EXPECT_EQ(p.content, "x < y <tool_ and trailing text");
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_EQ(p.tool_calls[0].arguments, R"({"days": 7})");
}

TEST(OutputParser, PushAfterFinishIsAnError) {
  OutputStreamParser parser(Format(false, ToolCallFormat::kNone));
  parser.Finish();
  EXPECT_THROW(parser.Push("x"), Error);
}

// ---- against the shipped templates ----

// Third-party tokenizers and chat templates vendored for the tests (see tests/data/NOTICE.md).
std::string DataDir() { return std::string(DFLASH_SOURCE_DIR) + "/tests/data"; }

std::string ReadTemplate(const std::string& name) {
  std::ifstream in(fs::path(DataDir()) / "templates" / name, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(OutputFormatDetection, ShippedTemplates) {
  struct Want {
    const char* file;
    bool reasoning;
    ToolCallFormat tools;
  };
  for (const Want& w : {Want{"Qwen-Qwen3-0.6B.jinja", true, ToolCallFormat::kHermesJson},
                        Want{"Qwen-Qwen2.5-7B-Instruct.jinja", false, ToolCallFormat::kHermesJson},
                        Want{"Qwen3-Coder.jinja", false, ToolCallFormat::kXml},
                        Want{"Qwen3.5-4B.jinja", true, ToolCallFormat::kXml},
                        Want{"meta-llama-Llama-3.1-8B-Instruct.jinja", false, ToolCallFormat::kNone},
                        Want{"openai-gpt-oss-120b.jinja", false, ToolCallFormat::kNone},
                        Want{"google-gemma-4-31B-it.jinja", false, ToolCallFormat::kNone}}) {
    const OutputFormat f = DetectOutputFormat(ReadTemplate(w.file), "");
    EXPECT_EQ(f.reasoning, w.reasoning) << w.file;
    EXPECT_EQ(f.tool_calls, w.tools) << w.file;
  }
  // Qwen3.5's generation prompt opens <think>; Qwen3 with thinking off closes it.
  const std::string qwen35 = ReadTemplate("Qwen3.5-4B.jinja");
  const ChatTemplate t35({{"default", qwen35}}, OJson::object(), "Qwen3.5");
  const OJson user = OJson::parse(R"([{"role": "user", "content": "hi"}])");
  EXPECT_TRUE(DetectOutputFormat(t35.Selected(false).source(), t35.Render(user, nullptr, true)).starts_in_reasoning);
  EXPECT_FALSE(
      DetectOutputFormat(qwen35, t35.Render(user, nullptr, true, OJson{{"enable_thinking", false}})).starts_in_reasoning);
}

// Rendering an assistant turn with a template and parsing the text back gives the message back.
void ExpectRoundTrip(const std::string& template_file, const OJson& tools, const OJson& assistant,
                     const std::string& expected_arguments) {
  const std::string source = ReadTemplate(template_file);
  const ChatTemplate t({{"default", source}}, OJson::object(), template_file);
  OJson messages = OJson::array({OJson{{"role", "user"}, {"content", "weather?"}}, assistant});
  const std::string prompt = t.Render(messages, tools, false);
  const std::string open = "<|im_start|>assistant\n";
  const size_t start = prompt.rfind(open) + open.size();
  const std::string completion = prompt.substr(start, prompt.rfind("<|im_end|>") - start);
  OutputFormat f = DetectOutputFormat(source, prompt.substr(0, start));
  f.tools = tools;
  const ParsedOutput p = ParseOutput(completion, f);
  EXPECT_EQ(p.content, assistant["content"].get<std::string>()) << template_file << "\n" << completion;
  EXPECT_EQ(p.reasoning_content, assistant.value("reasoning_content", "")) << template_file << "\n" << completion;
  ASSERT_EQ(p.tool_calls.size(), 1u) << template_file << "\n" << completion;
  EXPECT_EQ(p.tool_calls[0].name, assistant["tool_calls"][0]["function"]["name"].get<std::string>());
  EXPECT_EQ(p.tool_calls[0].arguments, expected_arguments) << template_file;
}

TEST(OutputParser, RoundTripsThroughShippedTemplates) {
  const OJson assistant = OJson::parse(R"({"role": "assistant", "content": "Checking now.",
      "reasoning_content": "Need the weather tool.",
      "tool_calls": [{"id": "x", "type": "function", "function": {"name": "get_weather",
                      "arguments": {"location": "Paris, FR", "days": 3, "tags": ["a", "b"]}}}]})");
  const std::string args = R"({"location": "Paris, FR", "days": 3, "tags": ["a", "b"]})";
  ExpectRoundTrip("Qwen-Qwen3-0.6B.jinja", kTools, assistant, args);
  ExpectRoundTrip("Qwen3.5-4B.jinja", kTools, assistant, args);
  OJson no_reasoning = assistant;
  no_reasoning.erase("reasoning_content");
  ExpectRoundTrip("Qwen3-Coder.jinja", kTools, no_reasoning, args);
  ExpectRoundTrip("Qwen-Qwen2.5-7B-Instruct.jinja", kTools, no_reasoning, args);
}

}  // namespace
}  // namespace dflash
