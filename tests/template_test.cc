// Chat templates: the Jinja engine against transformers' renders (goldens from
// tools/make_template_goldens.py), the model-directory loader, the CLI, and the errors bad
// templates and inputs must produce.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <sstream>

#include <unistd.h>

#include "core/error.h"
#include "text/chat_prompt.h"
#include "text/chat_template.h"
#include "text/jinja/template.h"

namespace dflash {
namespace {

namespace fs = std::filesystem;
using OJson = nlohmann::ordered_json;

const std::string kSourceDir = DFLASH_SOURCE_DIR;

// Third-party tokenizers and chat templates vendored for the tests (see tests/data/NOTICE.md).
std::string DataDir() { return std::string(DFLASH_SOURCE_DIR) + "/tests/data"; }

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

OJson Golden(const std::string& name) {
  const fs::path p = fs::path(kSourceDir) / "tests/goldens/templates" / name;
  std::ifstream in(p);
  if (!in) throw Error(p.string() + ": golden file missing (run tools/make_template_goldens.py)");
  return OJson::parse(in);
}

std::tm ParseNow(const std::string& iso) {  // "2025-03-14T09:26:53"
  std::tm tm{};
  std::istringstream ss(iso);
  ss >> std::get_time(&tm, "%Y-%m-%dT%H:%M:%S");
  mktime(&tm);  // fills in the weekday and day of the year
  return tm;
}

jinja::RenderOptions GoldenClock(const OJson& golden) { return jinja::RenderOptions{ParseNow(golden["now"])}; }

// Renders `source` with `vars`; returns the output, or "ERROR: message".
std::string TryRender(const std::string& source, const OJson& vars, const jinja::RenderOptions& options) {
  try {
    return jinja::Template(source, "snippet").Render(vars, options);
  } catch (const Error& e) {
    return std::string("ERROR: ") + e.what();
  }
}

TEST(JinjaSnippets, MatchTransformers) {
  const OJson golden = Golden("snippets.json");
  const jinja::RenderOptions clock = GoldenClock(golden);
  int checked = 0;
  for (const OJson& s : golden["snippets"]) {
    const std::string src = s["template"];
    const std::string got = TryRender(src, s["vars"], clock);
    if (s.contains("dflash_refuses")) {  // Python renders it; we must fail loudly instead
      EXPECT_EQ(got.rfind("ERROR: ", 0), 0u) << "template: " << src << " (" << s["dflash_refuses"] << ") rendered " << got;
    } else if (s.contains("output")) {
      EXPECT_EQ(got, s["output"].get<std::string>()) << "template: " << src;
    } else {
      EXPECT_EQ(got.rfind("ERROR: ", 0), 0u) << "template: " << src << "\ntransformers raised "
                                            << s["error"].get<std::string>() << "\nwe rendered: " << got;
    }
    ++checked;
  }
  EXPECT_GT(checked, 100);
}

// One shipped template over every conversation in cases.json.
class ShippedTemplate : public testing::TestWithParam<std::string> {};

TEST_P(ShippedTemplate, MatchesTransformers) {
  const fs::path path = fs::path(DataDir()) / "templates" / GetParam();
  const OJson cases = Golden("cases.json");
  const OJson golden = Golden(path.stem().string() + ".json");
  const ChatTemplate tmpl({{"default", ReadFile(path)}}, golden["special_tokens"], GetParam());
  const jinja::RenderOptions clock = GoldenClock(cases);
  int outputs = 0, errors = 0;
  for (const OJson& r : golden["renders"]) {
    const OJson& c = cases["cases"][r["case"].get<std::string>()];
    const OJson tools = c.contains("tools") ? c["tools"] : OJson();
    std::string got;
    try {
      got = tmpl.Render(c["messages"], tools, r["add_generation_prompt"], r["kwargs"], clock);
    } catch (const Error& e) {
      got = std::string("ERROR: ") + e.what();
    }
    const std::string where = r["case"].get<std::string>() + " agp=" + r["add_generation_prompt"].dump() +
                              " kwargs=" + r["kwargs"].dump();
    if (r.contains("output")) {
      EXPECT_EQ(got, r["output"].get<std::string>()) << where;
      ++outputs;
    } else {
      EXPECT_EQ(got.rfind("ERROR: ", 0), 0u) << where << ": transformers raised " << r["error"] << ", we rendered\n" << got;
      ++errors;
    }
  }
  EXPECT_GT(outputs, 20);
}

INSTANTIATE_TEST_SUITE_P(Templates, ShippedTemplate,
                         testing::Values("Qwen-Qwen2.5-7B-Instruct.jinja", "Qwen-Qwen3-0.6B.jinja",
                                         "Qwen3-Coder.jinja", "Qwen3.5-4B.jinja",
                                         "meta-llama-Llama-3.1-8B-Instruct.jinja", "openai-gpt-oss-120b.jinja",
                                         "google-gemma-4-31B-it.jinja"),
                         [](const testing::TestParamInfo<std::string>& info) {
                           std::string n = info.param.substr(0, info.param.find(".jinja"));
                           for (char& c : n) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return n;
                         });

// The raise_exception() text reaches the caller.
TEST(ShippedTemplateErrors, RaiseExceptionMessageSurvives) {
  const fs::path path = fs::path(DataDir()) / "templates/Qwen3.5-4B.jinja";
  const ChatTemplate tmpl({{"default", ReadFile(path)}}, OJson::object(), "Qwen3.5-4B.jinja");
  const OJson messages = OJson::parse(R"([{"role": "system", "content": "only system"}])");
  try {
    tmpl.Render(messages, nullptr, true);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("No user query found in messages."), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("Qwen3.5-4B.jinja:"), std::string::npos) << e.what();
  }
}

TEST(ChatTemplateDirectory, QwenTokenizerMatchesApplyChatTemplate) {
  const fs::path dir = fs::path(DataDir()) / "tokenizers/qwen3";
  const ChatTemplate tmpl = ChatTemplate::FromDirectory(dir.string());
  EXPECT_EQ(tmpl.special_tokens().value("eos_token", ""), "<|im_end|>");
  EXPECT_FALSE(tmpl.special_tokens().contains("bos_token"));  // null in the config: not passed
  const OJson cases = Golden("cases.json");
  const OJson golden = Golden("tokenizer_qwen3.json");
  for (const OJson& r : golden["renders"]) {
    const OJson& c = cases["cases"][r["case"].get<std::string>()];
    const OJson tools = c.contains("tools") ? c["tools"] : OJson();
    const std::string where = r["case"].get<std::string>() + " kwargs=" + r["kwargs"].dump();
    if (r.contains("output")) {
      EXPECT_EQ(tmpl.Render(c["messages"], tools, r["add_generation_prompt"], r["kwargs"]), r["output"].get<std::string>())
          << where;
    } else {
      EXPECT_THROW(tmpl.Render(c["messages"], tools, r["add_generation_prompt"], r["kwargs"]), Error) << where;
    }
  }
}

// A scratch model directory, removed afterwards.
class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() / ("dflash_tmpl_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  void Write(const std::string& name, const std::string& text) const {
    fs::create_directories((path_ / name).parent_path());
    std::ofstream(path_ / name, std::ios::binary) << text;
  }
  std::string str() const { return path_.string(); }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

const OJson kHello = OJson::parse(R"([{"role": "user", "content": "hi"}])");

TEST(ChatTemplateDirectory, NamedTemplatesPickToolUseWhenToolsGiven) {
  TempDir dir;
  dir.Write("tokenizer_config.json", R"({
    "bos_token": {"content": "<s>", "lstrip": false, "__type": "AddedToken"},
    "eos_token": "</s>",
    "chat_template": [{"name": "default", "template": "D{{ bos_token }}{{ messages[0].content }}{{ eos_token }}"},
                      {"name": "tool_use", "template": "T{{ tools|length }}"}]})");
  const ChatTemplate t = ChatTemplate::FromDirectory(dir.str());
  EXPECT_EQ(t.Render(kHello, nullptr, false), "D<s>hi</s>");
  EXPECT_EQ(t.Render(kHello, OJson::array({OJson::object()}), false), "T1");
  EXPECT_EQ(t.RenderNamed("tool_use", kHello, OJson::array(), false), "T0");
  EXPECT_EQ(t.Render(kHello, nullptr, false, OJson{{"bos_token", "[B]"}}), "D[B]hi</s>");  // kwargs win
  EXPECT_THROW(t.RenderNamed("nope", kHello, nullptr, false), Error);
}

TEST(ChatTemplateDirectory, JinjaFileWinsOverConfig) {
  TempDir dir;
  dir.Write("tokenizer_config.json", R"({"eos_token": "<e>", "chat_template": "from config"})");
  dir.Write("chat_template.jinja", "from file {{ eos_token }}{% if add_generation_prompt %}+{% endif %}\n");
  const ChatTemplate t = ChatTemplate::FromDirectory(dir.str());
  EXPECT_EQ(t.Render(kHello, nullptr, true), "from file <e>+");
  EXPECT_EQ(t.Render(kHello, nullptr, false), "from file <e>");
}

TEST(ChatTemplateDirectory, ErrorsNameTheProblem) {
  TempDir empty;
  try {
    ChatTemplate::FromDirectory(empty.str());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no chat template"), std::string::npos) << e.what();
  }
  TempDir bad;
  bad.Write("tokenizer_config.json", R"({"chat_template": "{{ x | frobnicate }}"})");
  try {
    ChatTemplate::FromDirectory(bad.str());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown filter 'frobnicate'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("tokenizer_config.json:1:"), std::string::npos) << e.what();
  }
  TempDir ok;
  ok.Write("chat_template.jinja", "{{ messages[0].content }}");
  const ChatTemplate t = ChatTemplate::FromDirectory(ok.str());
  EXPECT_THROW(t.Render(OJson::array(), nullptr, false), Error);           // empty conversation
  EXPECT_THROW(t.Render(OJson::object(), nullptr, false), Error);          // not a list
  EXPECT_THROW(t.Render(kHello, OJson::object(), false), Error);           // tools not a list
  EXPECT_THROW(t.Render(kHello, nullptr, false, OJson{{"messages", 1}}), Error);
}

// ---- the interpreter on its own ----

std::string Render(const std::string& src, const OJson& vars = OJson::object()) {
  return jinja::Template(src, "t.jinja").Render(vars);
}

std::string ErrorOf(const std::string& src, const OJson& vars = OJson::object()) {
  try {
    Render(src, vars);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Jinja, LoadTimeErrorsNameFeatureAndLine) {
  EXPECT_EQ(ErrorOf("line one\n{{ x | frobnicate }}"), "t.jinja:2: unknown filter 'frobnicate'");
  EXPECT_EQ(ErrorOf("{{ x | wordwrap }}"), "t.jinja:1: filter 'wordwrap' is not supported by dflash's template engine");
  EXPECT_EQ(ErrorOf("\n\n{% if x is frobbed %}{% endif %}"), "t.jinja:3: unknown test 'frobbed'");
  EXPECT_EQ(ErrorOf("{% include 'x.jinja' %}"), "t.jinja:1: tag '{% include %}' is not supported by dflash's template engine");
  EXPECT_EQ(ErrorOf("{% frob %}"), "t.jinja:1: unknown tag '{% frob %}'");
  EXPECT_EQ(ErrorOf("{% endif %}"), "t.jinja:1: unexpected '{% endif %}' with no open block it could close");
  EXPECT_EQ(ErrorOf("{% for x in y recursive %}{% endfor %}"),
            "t.jinja:1: recursive for loops are not supported by dflash's template engine");
  EXPECT_EQ(ErrorOf("a\n{% if x %}\nb"),
            "t.jinja:2: unexpected end of template: looking for 'elif' or 'else' or 'endif' to close 'if' from line 2");
  EXPECT_EQ(ErrorOf("{{ 1 +"), "t.jinja:1: unexpected end of template: '{{' opened on line 1 is never closed");
  EXPECT_EQ(ErrorOf("{{ (1 }}"), "t.jinja:1: unexpected '}', expected ')'");
  EXPECT_EQ(ErrorOf("{{ 'open }}"), "t.jinja:1: unterminated string literal");
  EXPECT_EQ(ErrorOf("{# never closed"), "t.jinja:1: missing end of comment tag");
  EXPECT_EQ(ErrorOf("{{ a b }}"), "t.jinja:1: expected end of print statement '}}', got 'b'");
  EXPECT_EQ(ErrorOf("{% break %}"), "t.jinja:1: 'break' outside of a for loop");
  EXPECT_EQ(ErrorOf("{% set true = 1 %}"), "t.jinja:1: can't assign to the constant 'true'");
  EXPECT_EQ(ErrorOf(std::string("bad \xff byte")), "t.jinja:1: template source is not valid UTF-8");
  EXPECT_EQ(ErrorOf("{% macro m(a=1, b) %}{% endmacro %}"), "t.jinja:1: non-default argument follows default argument");
}

TEST(Jinja, RuntimeErrorsNameLine) {
  EXPECT_EQ(ErrorOf("ok\n{{ missing.attr }}"), "t.jinja:2: 'missing' is undefined");
  EXPECT_EQ(ErrorOf("{{ raise_exception('nope') }}"), "t.jinja:1: template raised an exception: nope");
  EXPECT_EQ(ErrorOf("\n{% macro m() %}\n{{ 1 // 0 }}{% endmacro %}{{ m() }}"),
            "t.jinja:3: integer division or modulo by zero");
  EXPECT_EQ(ErrorOf("{{ 'x'.title() }}"), "t.jinja:1: str.title() is not supported");
  EXPECT_EQ(ErrorOf("{{ 9223372036854775807 + 1 }}"), "t.jinja:1: integer overflow in template arithmetic");
  EXPECT_EQ(ErrorOf("{% macro r(n) %}{{ r(n + 1) }}{% endmacro %}{{ r(0) }}"),
            "t.jinja:1: macro calls nested too deeply (more than 100)");
  EXPECT_EQ(ErrorOf("{{ x }}", OJson::array()), "t.jinja: template variables must be a JSON object, got array");
}

TEST(Jinja, DeepNestingIsRejectedNotACrash) {
  std::string deep = "{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}";
  EXPECT_NE(ErrorOf(deep).find("nested too deeply"), std::string::npos);
  std::string ifs;
  for (int i = 0; i < 1000; ++i) ifs += "{% if true %}";
  EXPECT_NE(ErrorOf(ifs).find("nested too deeply"), std::string::npos);
}

TEST(Jinja, WhitespaceControlAsTransformersConfiguresIt) {
  // trim_blocks: newline after a block tag goes; lstrip_blocks: indentation before it goes.
  EXPECT_EQ(Render("{% for m in ms %}\n    {{ m }}\n{% endfor %}\n", {{"ms", {1, 2}}}), "    1\n    2\n");
  EXPECT_EQ(Render("a\n  {%- if true %} b{% endif -%}  \n c"), "a bc");
  EXPECT_EQ(Render("  {%+ if true %}x{% endif +%}\nend"), "  x\nend");
}

TEST(Jinja, ToJsonKeepsKeyOrderAndText) {
  const OJson vars = OJson::parse(R"({"t": {"zeta": 1, "alpha": "<é>&", "f": 1.0, "n": [true, null]}})");
  EXPECT_EQ(Render("{{ t | tojson }}", vars), R"({"zeta": 1, "alpha": "<é>&", "f": 1.0, "n": [true, null]})");
  EXPECT_EQ(Render("{{ t.n | tojson(indent=2) }}", vars), "[\n  true,\n  null\n]");
}

TEST(Jinja, NamespaceCarriesStateOutOfLoops) {
  EXPECT_EQ(Render("{% set ns = namespace(n=0) %}{% set plain = 0 %}"
                   "{% for i in range(4) %}{% set ns.n = ns.n + i %}{% set plain = plain + i %}{% endfor %}"
                   "{{ ns.n }} {{ plain }}"),
            "6 0");
}

TEST(Jinja, StrftimeNowUsesTheGivenClock) {
  jinja::RenderOptions o;
  o.now = ParseNow("2024-02-29T23:59:01");
  EXPECT_EQ(jinja::Template("{{ strftime_now('%Y-%m-%d %H:%M:%S %a') }}", "t").Render(OJson::object(), o),
            "2024-02-29 23:59:01 Thu");
}

// ---- the CLI ----

std::string RunCommand(const std::string& cmd, int* status) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  *status = pclose(p);
  return out;
}

TEST(TemplateCli, PrintsTheRenderedPrompt) {
  const fs::path dir = fs::path(DataDir()) / "tokenizers/qwen3";
  const OJson cases = Golden("cases.json");
  const OJson golden = Golden("tokenizer_qwen3.json");
  TempDir tmp;
  for (const OJson& r : golden["renders"]) {
    if (!r.contains("output") || r["case"] != "tool_call_roundtrip") continue;
    const OJson& c = cases["cases"]["tool_call_roundtrip"];
    tmp.Write("messages.json", c["messages"].dump());
    tmp.Write("tools.json", c["tools"].dump());
    std::string cmd = std::string(DFLASH_BINARY) + " template --tokenizer " + dir.string() + " --messages " + tmp.str() +
                      "/messages.json --tools " + tmp.str() + "/tools.json";
    if (!r["add_generation_prompt"].get<bool>()) cmd += " --no-generation-prompt";
    if (!r["kwargs"].empty()) cmd += " --kwargs '" + r["kwargs"].dump() + "'";
    int status = -1;
    EXPECT_EQ(RunCommand(cmd, &status), r["output"].get<std::string>()) << cmd;
    EXPECT_EQ(status, 0) << cmd;
  }
  int status = 0;
  const std::string err = RunCommand(std::string(DFLASH_BINARY) + " template --tokenizer " + dir.string() +
                                         " --messages /nonexistent.json 2>&1",
                                     &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(err.find("/nonexistent.json"), std::string::npos) << err;
}

// The ids the engine prefills for a conversation: transformers' apply_chat_template(tokenize=True).
void ExpectChatPromptsMatch(const fs::path& dir, const std::string& golden_name) {
  const ChatTemplate tmpl = ChatTemplate::FromDirectory(dir.string());
  const text::Tokenizer tok = text::Tokenizer::Load(dir.string());
  const OJson cases = Golden("cases.json");
  const OJson golden = Golden(golden_name);
  int checked = 0;
  for (const OJson& r : golden["renders"]) {
    if (!r.contains("ids")) continue;
    const OJson& c = cases["cases"][r["case"].get<std::string>()];
    const OJson tools = c.contains("tools") ? c["tools"] : OJson();
    const ChatPrompt p = BuildChatPrompt(tmpl, tok, c["messages"], tools, r["kwargs"], r["add_generation_prompt"]);
    EXPECT_EQ(p.text, r["output"].get<std::string>()) << r["case"];
    EXPECT_EQ(p.ids, r["ids"].get<std::vector<int32_t>>()) << r["case"] << " kwargs=" << r["kwargs"].dump();
    ++checked;
  }
  EXPECT_GT(checked, 0) << golden_name << " has no tokenized renders";
}

TEST(ChatPrompt, QwenIdsMatchApplyChatTemplate) {
  const fs::path dir = fs::path(DataDir()) / "tokenizers/qwen3";
  ExpectChatPromptsMatch(dir, "tokenizer_qwen3.json");
}

TEST(ChatPrompt, ShippedPairIdsMatchApplyChatTemplate) {
  ExpectChatPromptsMatch(fs::path(kSourceDir) / "models/dflash-pair/target", "tokenizer_pair.json");
}

TEST(ChatPrompt, GenerateChatPrefillsTheTemplatedConversation) {
  const fs::path model = fs::path(kSourceDir) / "models/dflash-pair/target";
  const OJson cases = Golden("cases.json");
  const OJson golden = Golden("tokenizer_pair.json");
  int checked = 0;
  for (const OJson& r : golden["renders"]) {
    if (r["case"] != "multi_turn" || !r["add_generation_prompt"].get<bool>() || !r["kwargs"].empty()) continue;
    ++checked;
    TempDir tmp;
    tmp.Write("messages.json", cases["cases"]["multi_turn"]["messages"].dump());
    const std::string cmd = std::string(DFLASH_BINARY) + " generate -m " + model.string() + " --messages " +
                            tmp.str() + "/messages.json -n 2 --json --threads 1";
    int status = -1;
    const std::string out = RunCommand(cmd, &status);
    ASSERT_EQ(status, 0) << cmd << "\n" << out;
    const OJson j = OJson::parse(out);
    EXPECT_EQ(j["prompt_tokens"].get<size_t>(), r["ids"].size());
    EXPECT_EQ(j["message"]["role"], "assistant");
    EXPECT_EQ(j["message"]["content"], j["text"]);  // a ChatML model without <think> or tools
  }
  EXPECT_EQ(checked, 1);
  int status = 0;
  const std::string err = RunCommand(std::string(DFLASH_BINARY) + " generate -m " + model.string() +
                                         " --chat --prompt hi --chat-kwargs '[1]' 2>&1", &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(err.find("--chat-kwargs"), std::string::npos) << err;
}

}  // namespace
}  // namespace dflash
