// The server's parts that need no HTTP: request validation, stop sequences, the reply
// pipeline, slot choice and the metrics text; and the connection guard and access checks on
// raw loopback sockets. The HTTP API is driven by the openai package in tests/py/test_serve.py.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "serve/access.h"
#include "serve/api_error.h"
#include "serve/guarded_http.h"
#include "serve/metrics.h"
#include "serve/reply_stream.h"
#include "serve/request.h"
#include "serve/slot_pool.h"
#include "serve/stop_matcher.h"

namespace dflash::serve {
namespace {

namespace fs = std::filesystem;
const fs::path kPair = fs::path(DFLASH_SOURCE_DIR) / "models" / "dflash-pair";

OJson Chat(OJson extra = OJson::object()) {
  OJson j = {{"model", "x"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  for (auto& [k, v] : extra.items()) j[k] = v;
  return j;
}

// The parameter an ApiError names, or "" when parsing succeeded.
std::string RejectedParam(const OJson& body) {
  try {
    ParseChatRequest(body);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    return e.Body()["error"]["param"].is_null() ? "?" : e.Body()["error"]["param"].get<std::string>();
  }
  return "";
}

TEST(Request, ParsesTheBasics) {
  const ChatRequest r = ParseChatRequest(Chat({{"max_tokens", 7}, {"temperature", 0.5}, {"top_p", 0.9}, {"top_k", 40},
                                               {"seed", -3}, {"stop", "END"}, {"stream", true},
                                               {"stream_options", {{"include_usage", true}}},
                                               {"chat_template_kwargs", {{"enable_thinking", false}}},
                                               {"some_unknown_field", {1, 2}}}));
  EXPECT_EQ(r.model, "x");
  EXPECT_EQ(*r.max_tokens, 7);
  EXPECT_EQ(*r.temperature, 0.5);
  EXPECT_EQ(*r.top_k, 40);
  EXPECT_EQ(*r.seed, static_cast<uint64_t>(-3));
  EXPECT_EQ(r.stop, std::vector<std::string>{"END"});
  EXPECT_TRUE(r.stream && r.include_usage);
  EXPECT_EQ(r.chat_template_kwargs["enable_thinking"], false);
  EXPECT_EQ(r.messages[0]["content"], "hi");
  // max_completion_tokens wins over the deprecated max_tokens.
  EXPECT_EQ(*ParseChatRequest(Chat({{"max_tokens", 7}, {"max_completion_tokens", 9}})).max_tokens, 9);
}

TEST(Request, RejectsWrongTypesAndRangesNamingTheField) {
  EXPECT_EQ(RejectedParam(Chat({{"max_tokens", "10"}})), "max_tokens");
  EXPECT_EQ(RejectedParam(Chat({{"max_tokens", 0}})), "max_tokens");
  EXPECT_EQ(RejectedParam(Chat({{"max_tokens", 1.5}})), "max_tokens");
  EXPECT_EQ(RejectedParam(Chat({{"temperature", -1}})), "temperature");
  EXPECT_EQ(RejectedParam(Chat({{"temperature", "hot"}})), "temperature");
  EXPECT_EQ(RejectedParam(Chat({{"top_p", 0}})), "top_p");
  EXPECT_EQ(RejectedParam(Chat({{"top_k", -1}})), "top_k");
  EXPECT_EQ(RejectedParam(Chat({{"stream", 1}})), "stream");
  EXPECT_EQ(RejectedParam(Chat({{"stop", {"a", "b", "c", "d", "e"}}})), "stop");
  EXPECT_EQ(RejectedParam(Chat({{"stop", 3}})), "stop");
  EXPECT_EQ(RejectedParam(Chat({{"messages", "hi"}})), "messages");
  EXPECT_EQ(RejectedParam(Chat({{"messages", OJson::array()}})), "messages");
  EXPECT_EQ(RejectedParam(Chat({{"messages", {{{"role", "robot"}, {"content", "x"}}}}})), "messages[0].role");
  EXPECT_EQ(RejectedParam(Chat({{"messages", {{{"role", "user"}, {"content", 5}}}}})), "messages[0].content");
  EXPECT_EQ(RejectedParam(Chat({{"tools", {{{"type", "function"}}}}})), "tools[0].function");
  EXPECT_EQ(RejectedParam(Chat({{"tool_choice", "sometimes"}})), "tool_choice");
  EXPECT_EQ(RejectedParam(Chat({{"tool_choice", "required"}})), "tool_choice");  // no tools
}

TEST(Request, UnsupportedSamplingFieldsAreRejectedUnlessNoOps) {
  for (const char* key : {"presence_penalty", "frequency_penalty"}) {  // implemented: only out of range
    EXPECT_EQ(RejectedParam(Chat({{key, 2.5}})), key);
    EXPECT_EQ(RejectedParam(Chat({{key, 0.5}})), "");
  }
  EXPECT_EQ(RejectedParam(Chat({{"repetition_penalty", 0}})), "repetition_penalty");
  EXPECT_EQ(RejectedParam(Chat({{"repetition_penalty", 1.1}})), "");
  EXPECT_EQ(RejectedParam(Chat({{"min_p", 1.5}})), "min_p");
  EXPECT_EQ(RejectedParam(Chat({{"logit_bias", {{"42", 5}}}})), "logit_bias");
  EXPECT_EQ(RejectedParam(Chat({{"logit_bias", OJson::object()}})), "");
  EXPECT_EQ(RejectedParam(Chat({{"logprobs", true}})), "logprobs");
  EXPECT_EQ(RejectedParam(Chat({{"logprobs", false}})), "");
  EXPECT_EQ(RejectedParam(Chat({{"n", 2}})), "n");
  EXPECT_EQ(RejectedParam(Chat({{"response_format", {{"type", "json_object"}}}})), "response_format");
}

TEST(Request, ToolsAndAssistantToolCalls) {
  const OJson tools = {{{"type", "function"}, {"function", {{"name", "get_weather"}, {"parameters", OJson::object()}}}}};
  const OJson messages = {
      {{"role", "user"}, {"content", {{{"type", "text"}, {"text", "weather "}}, {{"type", "text"}, {"text", "in Paris?"}}}}},
      {{"role", "assistant"},
       {"content", nullptr},
       {"tool_calls", {{{"id", "c1"}, {"type", "function"},
                        {"function", {{"name", "get_weather"}, {"arguments", "{\"city\": \"Paris\"}"}}}}}}},
      {{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "sunny"}}};
  const ChatRequest r = ParseChatRequest(Chat({{"messages", messages}, {"tools", tools},
                                               {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}}}));
  EXPECT_EQ(r.tool_choice, ToolChoice::kNamed);
  EXPECT_EQ(r.tool_name, "get_weather");
  EXPECT_EQ(r.messages[0]["content"], "weather in Paris?");
  EXPECT_EQ(r.messages[1]["content"], "");
  EXPECT_EQ(r.messages[1]["tool_calls"][0]["function"]["arguments"]["city"], "Paris");
  EXPECT_EQ(RejectedParam(Chat({{"tools", tools}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "nope"}}}}}})),
            "tool_choice");
  OJson bad_args = messages;
  bad_args[1]["tool_calls"][0]["function"]["arguments"] = "{not json";
  EXPECT_EQ(RejectedParam(Chat({{"messages", bad_args}})), "messages[1].tool_calls[0].function.arguments");
}

TEST(Request, BodiesAndCompletionPrompts) {
  EXPECT_THROW(ParseBody("{\"model\": "), ApiError);
  EXPECT_THROW(ParseBody("[1, 2]"), ApiError);
  EXPECT_THROW(ParseBody(""), ApiError);
  EXPECT_EQ(*ParseCompletionRequest({{"prompt", "def f("}}).prompt_text, "def f(");
  EXPECT_EQ(*ParseCompletionRequest({{"prompt", {"def f("}}}).prompt_text, "def f(");
  EXPECT_EQ(ParseCompletionRequest({{"prompt", {1, 2, 3}}}).prompt_ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_THROW(ParseCompletionRequest({{"prompt", {"a", "b"}}}), ApiError);
  EXPECT_THROW(ParseCompletionRequest({{"prompt", {1, -2}}}), ApiError);
  EXPECT_THROW(ParseCompletionRequest(OJson::object()), ApiError);
  EXPECT_THROW(ParseCompletionRequest({{"prompt", "x"}, {"echo", true}}), ApiError);
}

TEST(StopMatcher, CutsAtTheFirstStopAndHoldsBackPossibleStarts) {
  StopMatcher m({"</end>", "STOP"});
  EXPECT_EQ(m.Push("hello </"), "hello ");  // "</" may begin "</end>"
  EXPECT_EQ(m.Push("b> more S"), "</b> more ");
  EXPECT_EQ(m.Push("TOP tail"), "");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.Push("x"), "");
  EXPECT_EQ(m.Finish(), "");

  StopMatcher n({"ab"});
  EXPECT_EQ(n.Push("xa"), "x");
  EXPECT_EQ(n.Finish(), "a");  // the stream ended without the stop
  EXPECT_FALSE(n.stopped());
}

std::optional<text::Tokenizer> PairTokenizer() {
  if (!fs::exists(kPair / "target" / "tokenizer.json")) return std::nullopt;
  return text::Tokenizer::Load((kPair / "target").string());
}

TEST(ReplyStream, DropsEndTokensAndCutsStopSequences) {
  const auto tok = PairTokenizer();
  ASSERT_TRUE(tok);
  const std::string text = "def add(a, b):\n    return a + b\n";
  std::vector<int32_t> ids = tok->Encode(text);
  ids.push_back(2);  // <|im_end|>
  ReplyStream all(*tok, {2, 0}, {}, std::nullopt);
  std::string shown;
  for (int32_t id : ids) shown += all.Push({&id, 1}).content;
  shown += all.Finish().content;
  EXPECT_EQ(shown, text);

  ReplyStream cut(*tok, {2, 0}, {"return"}, std::nullopt);
  shown.clear();
  for (int32_t id : ids) shown += cut.Push({&id, 1}).content;
  EXPECT_TRUE(cut.stopped());
  shown += cut.Finish().content;
  EXPECT_EQ(shown, "def add(a, b):\n    ");
}

TEST(ReplyStream, ChatFormatSplitsToolCallsAndForcedPrefixCounts) {
  const auto tok = PairTokenizer();
  ASSERT_TRUE(tok);
  OutputFormat f;
  f.tool_calls = ToolCallFormat::kHermesJson;
  f.call_id_prefix = "call_t_";
  // The prompt already opened the call (tool_choice named); the model writes the rest.
  ReplyStream s(*tok, {2}, {}, f, "<tool_call>\n{\"name\": \"f\", \"arguments\": ");
  const std::vector<int32_t> ids = tok->Encode("{\"x\": 1}}\n</tool_call>");
  OutputDelta d = s.Push(ids);
  const OutputDelta tail = s.Finish();
  for (const ToolCall& c : tail.tool_calls) d.tool_calls.push_back(c);
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].name, "f");
  EXPECT_EQ(OJson::parse(d.tool_calls[0].arguments), OJson({{"x", 1}}));
  EXPECT_EQ(d.tool_calls[0].id, "call_t_0");
  EXPECT_EQ(d.content + tail.content, "");
}

// The shipped pair's target with a short context, for slot-pool tests.
EngineOptions SmallPairTarget() {
  EngineOptions o;
  o.target_dir = (kPair / "target").string();
  o.context = 64;
  o.threads = 1;
  return o;
}

TEST(SlotPool, PicksTheLongestPrefixThenLeastRecentlyUsed) {
  Engine engine(SmallPairTarget());
  SlotPool pool(engine, 3);
  const auto far = SlotPool::Clock::now() + std::chrono::seconds(5);
  const std::vector<int32_t> a = {5, 6, 7, 8, 9}, b = {5, 6, 10, 11};
  int slot_a;
  {
    auto l = pool.Acquire(a, far, std::chrono::milliseconds(10), {});
    ASSERT_TRUE(l);
    l->slot().seq.tokens = {5, 6, 7, 8};  // as if it had served `a`
    slot_a = l->slot().id;
  }
  {
    auto l = pool.Acquire(a, far, std::chrono::milliseconds(10), {});
    EXPECT_EQ(l->slot().id, slot_a);  // longest prefix
    auto other = pool.Acquire(b, far, std::chrono::milliseconds(10), {});
    EXPECT_NE(other->slot().id, slot_a);
    EXPECT_EQ(pool.busy(), 2);
  }
  // All held: the next request waits and gives up at its deadline.
  auto l1 = pool.Acquire(a, far, std::chrono::milliseconds(10), {});
  auto l2 = pool.Acquire(a, far, std::chrono::milliseconds(10), {});
  auto l3 = pool.Acquire(a, far, std::chrono::milliseconds(10), {});
  ASSERT_TRUE(l1 && l2 && l3);
  EXPECT_FALSE(pool.Acquire(a, SlotPool::Clock::now() + std::chrono::milliseconds(30), std::chrono::milliseconds(10), {}));
  int polls = 0;
  EXPECT_FALSE(pool.Acquire(a, far, std::chrono::milliseconds(5), [&] { return ++polls < 3; }));
  EXPECT_EQ(polls, 3);
}

TEST(SlotPool, SavedSequencesKeepWhatASlotWouldLose) {
  Engine engine(SmallPairTarget());
  SlotPool pool(engine, 1, 2);
  const auto far = SlotPool::Clock::now() + std::chrono::seconds(5);
  const auto serve = [&](const std::vector<int32_t>& prompt) {
    auto l = pool.Acquire(prompt, far, std::chrono::milliseconds(10), {});
    const int reused = engine.ReusablePrefix(l->slot().seq, prompt);
    l->slot().seq.tokens = prompt;  // as if it had served `prompt`
    return reused;
  };
  const std::vector<int32_t> a = {5, 6, 7, 8, 9}, b = {10, 11, 12, 13}, c = {20, 21, 22};
  EXPECT_EQ(serve(a), 0);
  EXPECT_EQ(serve(b), 0);  // a is saved, not overwritten
  EXPECT_EQ(serve(a), 4);  // a comes back from the saved set
  EXPECT_EQ(serve(b), 3);
  EXPECT_EQ(serve(c), 0);  // a and b are both saved now
  EXPECT_EQ(serve({20, 21, 22, 23}), 3);
  EXPECT_EQ(serve({30, 31, 32}), 0);  // the saved set is full: a, the least recently used, goes
  EXPECT_EQ(serve(a), 0);
  EXPECT_EQ(serve({20, 21, 22, 23, 24}), 4);  // c's turn is still saved
}

TEST(SlotPool, TheLongestPrefixAcrossSlotAndSavedWins) {
  Engine engine(SmallPairTarget());
  SlotPool pool(engine, 1, 2);
  const auto far = SlotPool::Clock::now() + std::chrono::seconds(5);
  const auto serve = [&](const std::vector<int32_t>& prompt, const std::vector<int32_t>& reply) {
    auto l = pool.Acquire(prompt, far, std::chrono::milliseconds(10), {});
    const int reused = engine.ReusablePrefix(l->slot().seq, prompt);
    l->slot().seq.tokens = prompt;  // as if it had served `prompt` and answered `reply`
    l->slot().seq.tokens.insert(l->slot().seq.tokens.end(), reply.begin(), reply.end());
    return reused;
  };
  const std::vector<int32_t> a = {5, 6, 7, 8, 9}, b = {10, 11, 12, 13}, c = {20, 21, 22, 23, 24};
  serve(a, {40, 41});
  serve(b, {42});
  serve(c, {43, 44});  // the saved set is full: a and b
  // Regenerating the last request keeps the slot's sequence: the whole prompt but the last token.
  EXPECT_EQ(serve(c, {45, 46}), 4);
  // Forking inside the last reply reuses the prompt and the reply up to the fork.
  EXPECT_EQ(serve({20, 21, 22, 23, 24, 45, 99}, {}), 6);
  // The saved sequences were not touched by either.
  EXPECT_EQ(serve(a, {}), 4);
  EXPECT_EQ(serve(b, {}), 3);
}

// A GuardedHttpServer on a free loopback port that answers GET /health, serving until destroyed.
class HealthServer {
 public:
  explicit HealthServer(const ConnectionLimits& limits) : http_(limits) {
    http_.Get("/health", [](const httplib::Request&, httplib::Response& res) { res.set_content("ok", "text/plain"); });
    port_ = http_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { http_.listen_after_bind(); });
  }
  ~HealthServer() {
    http_.stop();
    thread_.join();
  }

  // A connected client socket that has sent `bytes`.
  int Open(const std::string& bytes) const {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port_));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    return fd;
  }

 private:
  GuardedHttpServer http_;
  int port_ = 0;
  std::thread thread_;
};

// What the server sends on `fd` until it closes the connection (or `limit` passes).
std::string ReadUntilClosed(int fd, std::chrono::milliseconds limit) {
  std::string out;
  const auto until = std::chrono::steady_clock::now() + limit;
  char buf[4096];
  while (std::chrono::steady_clock::now() < until) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, n);
  }
  return out;
}

const std::string kHealth = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";

TEST(GuardedHttp, ARequestThatTricklesIsCutOffAtItsDeadline) {
  HealthServer server(ConnectionLimits{8, 1.0});
  const int fd = server.Open("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n");
  const auto start = std::chrono::steady_clock::now();
  bool closed = false;
  // One header line every 200 ms: each read is quick, the request never ends.
  while (!closed && std::chrono::steady_clock::now() - start < std::chrono::seconds(5)) {
    closed = ::send(fd, "X-Slow: 1\r\n", 11, MSG_NOSIGNAL) < 0 || !ReadUntilClosed(fd, std::chrono::milliseconds(200)).empty();
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ::close(fd);
  EXPECT_TRUE(closed);
  EXPECT_GT(s, 0.8);
  EXPECT_LT(s, 2.5);
}

TEST(GuardedHttp, ConnectionsOverTheLimitAreRefusedAndHealthStillAnswers) {
  HealthServer server(ConnectionLimits{3, 30});
  const int slow1 = server.Open("GET /health HTTP/1.1\r\n"), slow2 = server.Open("GET /health HTTP/1.1\r\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const int third = server.Open(kHealth);
  EXPECT_NE(ReadUntilClosed(third, std::chrono::seconds(2)).find("\r\n\r\nok"), std::string::npos);
  ::close(third);
  const int held = server.Open("GET /health HTTP/1.1\r\n");  // the limit is reached
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const int over = server.Open(kHealth);
  const std::string refused = ReadUntilClosed(over, std::chrono::seconds(2));
  EXPECT_EQ(refused.rfind("HTTP/1.1 503", 0), 0u) << refused;
  EXPECT_NE(refused.find("too_many_connections"), std::string::npos);
  for (int fd : {slow1, slow2, held, over}) ::close(fd);
  std::string answer;
  for (int tries = 0; tries < 20 && answer.find("\r\n\r\nok") == std::string::npos; ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const int fd = server.Open(kHealth);
    answer = ReadUntilClosed(fd, std::chrono::seconds(2));
    ::close(fd);
  }
  EXPECT_NE(answer.find("\r\n\r\nok"), std::string::npos) << answer;
}

TEST(Access, HostNamesAndKeys) {
  EXPECT_EQ(HostName("LocalHost:8080"), "localhost");
  EXPECT_EQ(HostName("[::1]:8080"), "::1");
  EXPECT_EQ(HostName("example.com."), "example.com");
  for (const char* h : {"localhost", "127.0.0.1:80", "127.9.9.9", "[::1]", "::1"}) EXPECT_TRUE(IsLoopbackName(h)) << h;
  for (const char* h : {"localhost.evil.com", "128.0.0.1", "0.0.0.0", "evil.com:8080", "[::2]"}) {
    EXPECT_FALSE(IsLoopbackName(h)) << h;
  }
  EXPECT_TRUE(ConstantTimeEquals("Bearer k", "Bearer k"));
  EXPECT_FALSE(ConstantTimeEquals("Bearer k", "Bearer j"));
  EXPECT_FALSE(ConstantTimeEquals("Bearer k", "Bearer kk"));
  EXPECT_FALSE(ConstantTimeEquals("", "x"));
  EXPECT_TRUE(ConstantTimeEquals("", ""));
}

TEST(Metrics, CountsAcceptancePerDraftPosition) {
  Metrics m;
  GenerationRecord r;
  r.stats.prompt_tokens = 10;
  r.stats.completion_tokens = 9;
  r.stats.cycles = 3;
  r.stats.accept_hist = {0, 1, 0, 2, 0};  // B = 4: one cycle accepted 0 drafts, two accepted 2
  r.finish_reason = FinishReason::kStop;
  m.Record(r);
  m.CountRequest("chat", 200);
  const std::string text = m.Render(PoolGauges{1, 0, 0, 0, 0});
  EXPECT_NE(text.find("dflash_spec_position_accepted_total{position=\"1\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("dflash_spec_position_accepted_total{position=\"2\"} 2\n"), std::string::npos);
  EXPECT_NE(text.find("dflash_spec_position_accepted_total{position=\"3\"} 0\n"), std::string::npos);
  EXPECT_NE(text.find("dflash_requests_total{endpoint=\"chat\",status=\"200\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("dflash_generations_total{finish_reason=\"stop\"} 1\n"), std::string::npos);
}

}  // namespace
}  // namespace dflash::serve
