// The Anthropic Messages and OpenAI Responses translators: requests become the chat request the
// server already runs (exact messages, tools and tool_choice), and each API's stream adds up to
// its whole reply. End-to-end checks with the official clients are in tests/py/test_agent_apis.py.
#include <gtest/gtest.h>

#include "serve/access.h"
#include "serve/anthropic_format.h"
#include "serve/api_error.h"
#include "serve/reply_blocks.h"
#include "serve/responses_format.h"
#include "serve/stop_matcher.h"

namespace dflash::serve {
namespace {

// Equal as JSON values, whatever the order of object keys (messages are read by key).
bool SameJson(const OJson& a, const OJson& b) { return nlohmann::json::parse(a.dump()) == nlohmann::json::parse(b.dump()); }

// The parameter an ApiError names, or "" when parsing succeeded.
template <typename Parse>
std::string RejectedParam(Parse parse, const OJson& body) {
  try {
    parse(body);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    return e.Body()["error"]["param"].is_null() ? "?" : e.Body()["error"]["param"].get<std::string>();
  }
  return "";
}

TEST(AnthropicRequest, BecomesTheChatRequest) {
  const OJson body = OJson::parse(R"({
    "model": "claude", "max_tokens": 50, "temperature": 0.5, "top_k": 7, "stop_sequences": ["a", "b", "c", "d", "e"],
    "metadata": {"user_id": "u"}, "thinking": {"type": "disabled"},
    "system": [{"type": "text", "text": "S1", "cache_control": {"type": "ephemeral"}}, {"type": "text", "text": "S2"}],
    "tools": [{"name": "f", "description": "d", "input_schema": {"type": "object"}, "cache_control": {"type": "ephemeral"}}],
    "tool_choice": {"type": "any"},
    "messages": [
      {"role": "user", "content": "hi"},
      {"role": "assistant", "content": [{"type": "thinking", "thinking": "hmm", "signature": "s"},
                                        {"type": "text", "text": "calling"},
                                        {"type": "tool_use", "id": "t1", "name": "f", "input": {"x": 1}}]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "42"},
                                   {"type": "text", "text": "thanks"}, {"type": "text", "text": "more"}]}]})");
  const ChatRequest r = ParseAnthropicRequest(body);
  EXPECT_EQ(r.model, "claude");
  EXPECT_EQ(r.max_tokens, 50);
  EXPECT_EQ(r.temperature, 0.5);
  EXPECT_EQ(r.top_k, 7);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"a", "b", "c", "d", "e"}));
  EXPECT_EQ(r.tool_choice, ToolChoice::kRequired);
  EXPECT_EQ(r.chat_template_kwargs, OJson::parse(R"({"enable_thinking": false})"));
  EXPECT_EQ(r.tools, OJson::parse(R"([{"type": "function", "function": {"name": "f", "description": "d",
                                       "parameters": {"type": "object"}}}])"));
  EXPECT_PRED2(SameJson, r.messages, OJson::parse(R"([
    {"role": "system", "content": "S1\n\nS2"},
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": "calling", "reasoning_content": "hmm",
     "tool_calls": [{"id": "t1", "type": "function", "function": {"name": "f", "arguments": {"x": 1}}}]},
    {"role": "tool", "tool_call_id": "t1", "content": "42"},
    {"role": "user", "content": "thanks\n\nmore"}])"));
}

TEST(AnthropicRequest, BadFieldsAreNamedByTheirPath) {
  const auto parse = [](const OJson& b) { ParseAnthropicRequest(b); };
  const auto with = [](const char* extra) {
    OJson b = OJson::parse(R"({"max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]})");
    b.update(OJson::parse(extra));
    return b;
  };
  EXPECT_EQ(RejectedParam(parse, with("{}")), "");
  EXPECT_EQ(RejectedParam(parse, OJson::parse(R"({"messages": [{"role": "user", "content": "hi"}]})")), "max_tokens");
  EXPECT_EQ(RejectedParam(parse, with(R"({"max_tokens": 0})")), "max_tokens");
  EXPECT_EQ(RejectedParam(parse, with(R"({"messages": []})")), "messages");
  EXPECT_EQ(RejectedParam(parse, with(R"({"messages": [{"role": "user", "content": [{"type": "image"}]}]})")),
            "messages[0].content[0].type");
  EXPECT_EQ(RejectedParam(parse, with(R"({"messages": [{"role": "assistant", "content": [{"type": "tool_use", "id": "x", "name": "f"}]}]})")),
            "messages[0].content[0].input");
  EXPECT_EQ(RejectedParam(parse, with(R"({"messages": [{"role": "user", "content": [{"type": "tool_result"}]}]})")),
            "messages[0].content[0].tool_use_id");
  EXPECT_EQ(RejectedParam(parse, with(R"({"system": [{"type": "image"}]})")), "system[0].type");
  EXPECT_EQ(RejectedParam(parse, with(R"({"stop_sequences": [""]})")), "stop_sequences[0]");
  EXPECT_EQ(RejectedParam(parse, with(R"({"tool_choice": {"type": "auto"}})")), "");
  EXPECT_EQ(RejectedParam(parse, with(R"({"tool_choice": {"type": "tool"}})")), "tool_choice.name");
  EXPECT_EQ(RejectedParam(parse, with(R"({"tool_choice": {"type": "all"}})")), "tool_choice.type");
  EXPECT_EQ(RejectedParam(parse, with(R"({"tool_choice": {"type": "any"}})")), "tool_choice");  // no tools
  EXPECT_EQ(RejectedParam(parse, with(R"({"top_p": 0})")), "top_p");
  // count_tokens has no max_tokens
  EXPECT_NO_THROW(ParseAnthropicRequest(OJson::parse(R"({"messages": [{"role": "user", "content": "hi"}]})"), true));
}

TEST(AnthropicErrors, TypesFollowTheStatus) {
  EXPECT_EQ(AnthropicErrorBody(BadRequest("bad", "x")),
            OJson::parse(R"({"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}})"));
  EXPECT_EQ(AnthropicErrorBody(ApiError(401, "authentication_error", "m"))["error"]["type"], "authentication_error");
  EXPECT_EQ(AnthropicErrorBody(ApiError(404, "invalid_request_error", "m"))["error"]["type"], "not_found_error");
  EXPECT_EQ(AnthropicErrorBody(ApiError(413, "invalid_request_error", "m"))["error"]["type"], "request_too_large");
  EXPECT_EQ(AnthropicErrorBody(ApiError(503, "server_error", "m"))["error"]["type"], "overloaded_error");
  EXPECT_EQ(AnthropicErrorBody(ApiError(500, "server_error", "m"))["error"]["type"], "api_error");
  EXPECT_STREQ(AnthropicStopReason(FinishReason::kStop, ""), "end_turn");
  EXPECT_STREQ(AnthropicStopReason(FinishReason::kStop, "###"), "stop_sequence");
  EXPECT_STREQ(AnthropicStopReason(FinishReason::kLength, ""), "max_tokens");
  EXPECT_STREQ(AnthropicStopReason(FinishReason::kToolCalls, ""), "tool_use");
}

TEST(ResponsesRequest, BecomesTheChatRequest) {
  const OJson body = OJson::parse(R"({
    "model": "gpt", "instructions": "be brief", "max_output_tokens": 9, "top_p": 0.5, "store": true,
    "include": ["reasoning.encrypted_content"], "prompt_cache_key": "k", "reasoning": {"effort": "high"},
    "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}, "strict": true}],
    "tool_choice": {"type": "function", "name": "f"},
    "input": [
      {"role": "developer", "content": "dev"},
      {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}]},
      {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": "think"}]},
      {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "calling"}]},
      {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{\"x\": 1}"},
      {"type": "function_call", "call_id": "c2", "name": "f", "arguments": "{}"},
      {"type": "function_call_output", "call_id": "c1", "output": "one"},
      {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "two"}]}]})");
  const ChatRequest r = ParseResponsesRequest(body);
  EXPECT_EQ(r.max_tokens, 9);
  EXPECT_EQ(r.top_p, 0.5);
  EXPECT_EQ(r.tool_choice, ToolChoice::kNamed);
  EXPECT_EQ(r.tool_name, "f");
  EXPECT_EQ(r.chat_template_kwargs, OJson::parse(R"({"reasoning_effort": "high"})"));
  EXPECT_EQ(r.tools, OJson::parse(R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}])"));
  EXPECT_PRED2(SameJson, r.messages, OJson::parse(R"([
    {"role": "system", "content": "be brief"},
    {"role": "system", "content": "dev"},
    {"role": "user", "content": "ab"},
    {"role": "assistant", "content": "calling", "reasoning_content": "think",
     "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"x": 1}}},
                    {"id": "c2", "type": "function", "function": {"name": "f", "arguments": {}}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "one"},
    {"role": "tool", "tool_call_id": "c2", "content": "two"}])"));
  EXPECT_EQ(ParseResponsesRequest(OJson::parse(R"({"input": "hello"})")).messages,
            OJson::parse(R"([{"role": "user", "content": "hello"}])"));
}

TEST(ResponsesRequest, BadFieldsAreNamedAndStoredStateIsRefused) {
  const auto parse = [](const OJson& b) { ParseResponsesRequest(b); };
  const auto with = [](const char* extra) {
    OJson b = OJson::parse(R"({"input": "hi"})");
    b.update(OJson::parse(extra));
    return b;
  };
  EXPECT_EQ(RejectedParam(parse, with("{}")), "");
  EXPECT_EQ(RejectedParam(parse, OJson::parse("{}")), "input");
  EXPECT_EQ(RejectedParam(parse, with(R"({"previous_response_id": "resp_1"})")), "previous_response_id");
  EXPECT_EQ(RejectedParam(parse, with(R"({"conversation": "c"})")), "conversation");
  EXPECT_EQ(RejectedParam(parse, with(R"({"max_output_tokens": -1})")), "max_output_tokens");
  EXPECT_EQ(RejectedParam(parse, with(R"({"input": []})")), "input");
  EXPECT_EQ(RejectedParam(parse, with(R"({"input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "[]"}]})")),
            "input[0].arguments");
  EXPECT_EQ(RejectedParam(parse, with(R"({"input": [{"type": "function_call_output", "output": "x"}]})")), "input[0].call_id");
  EXPECT_EQ(RejectedParam(parse, with(R"({"input": [{"role": "user", "content": [{"type": "input_file"}]}]})")),
            "input[0].content[0].type");
  EXPECT_EQ(RejectedParam(parse, with(R"({"tools": [{"type": "file_search"}]})")), "tools[0].type");
  EXPECT_EQ(RejectedParam(parse, with(R"({"tool_choice": "any"})")), "tool_choice");
  EXPECT_EQ(RejectedParam(parse, with(R"({"text": {"format": {"type": "json_schema"}}})")), "text.format");
  EXPECT_EQ(RejectedParam(parse, with(R"({"text": {"format": {"type": "text"}}, "store": false})")), "");
}

ParsedOutput Reply() {
  ParsedOutput p;
  p.reasoning_content = "why";
  p.content = "Let me check.";
  p.tool_calls = {{"call_1", "f", R"({"x": 1})"}};
  return p;
}

// The reply in three deltas, as a stream would show it.
std::vector<OutputDelta> Deltas() {
  OutputDelta a, b, c;
  a.reasoning_content = "wh";
  b.reasoning_content = "y";
  b.content = "Let me ";
  c.content = "check.";
  c.tool_calls = {{"call_1", "f", R"({"x": 1})"}};
  return {a, b, c};
}

TEST(ReplyBlocks, DeltasOpenGrowAndCloseBlocksInOrder) {
  struct Log final : BlockSequencer::Sink {
    std::string events;
    void Open(int i, const ReplyBlock&) override { events += "open" + std::to_string(i) + "|"; }
    void Grow(int i, const ReplyBlock&, std::string_view piece) override {
      events += "grow" + std::to_string(i) + ":" + std::string(piece) + "|";
    }
    void Close(int i, const ReplyBlock& b) override { events += "close" + std::to_string(i) + "=" + b.text + "|"; }
  } log;
  BlockSequencer s;
  for (const OutputDelta& d : Deltas()) s.Push(d, log);
  s.Finish(log);
  EXPECT_EQ(log.events,
            "open0|grow0:wh|grow0:y|close0=why|open1|grow1:Let me |grow1:check.|close1=Let me check.|"
            "open2|grow2:{\"x\": 1}|close2={\"x\": 1}|");
  const std::vector<ReplyBlock> whole = ReplyBlocks(Reply());
  ASSERT_EQ(whole.size(), 3u);
  EXPECT_EQ(whole[0].kind, BlockKind::kReasoning);
  EXPECT_EQ(whole[1].text, "Let me check.");
  EXPECT_EQ(whole[2].call_id, "call_1");
  EXPECT_EQ(whole[2].name, "f");
}

GenerateStats Stats() {
  GenerateStats s;
  s.prompt_tokens = 30;
  s.cached_tokens = 20;
  s.completion_tokens = 7;
  return s;
}

TEST(AnthropicReply, StreamAddsUpToTheMessage) {
  const ParsedOutput parsed = Reply();
  const GenerateStats stats = Stats();
  const std::string stop, mode = "dflash";
  const FinishedReply done{parsed, FinishReason::kToolCalls, stop, stats, mode};
  AnthropicReplyFormat f(ResponseHeader{"msg_1", "message", 0, "m"}, 30);
  const OJson whole = f.Reply(done);
  EXPECT_EQ(whole["content"], OJson::parse(R"([{"type": "thinking", "thinking": "why", "signature": ""},
                                               {"type": "text", "text": "Let me check."},
                                               {"type": "tool_use", "id": "call_1", "name": "f", "input": {"x": 1}}])"));
  EXPECT_EQ(whole["stop_reason"], "tool_use");
  EXPECT_EQ(whole["usage"], OJson::parse(R"({"input_tokens": 10, "output_tokens": 7, "cache_read_input_tokens": 20})"));

  SseEvents events;
  f.Start(events);
  for (const OutputDelta& d : Deltas()) f.Delta(d, events);
  f.End(done, events);
  // Accumulate as a client does.
  OJson message;
  std::vector<std::string> json_parts(3);
  for (const SseEvent& e : events) {
    EXPECT_EQ(e.name, e.data["type"]);
    if (e.name == "message_start") message = e.data["message"];
    if (e.name == "content_block_start") message["content"].push_back(e.data["content_block"]);
    if (e.name == "content_block_delta") {
      OJson& block = message["content"][e.data["index"].get<size_t>()];
      const OJson& d = e.data["delta"];
      if (d["type"] == "thinking_delta") block["thinking"] = block["thinking"].get<std::string>() + d["thinking"].get<std::string>();
      if (d["type"] == "text_delta") block["text"] = block["text"].get<std::string>() + d["text"].get<std::string>();
      if (d["type"] == "input_json_delta") json_parts[e.data["index"].get<size_t>()] += d["partial_json"].get<std::string>();
    }
    if (e.name == "content_block_stop" && !json_parts[e.data["index"].get<size_t>()].empty()) {
      message["content"][e.data["index"].get<size_t>()]["input"] = OJson::parse(json_parts[e.data["index"].get<size_t>()]);
    }
    if (e.name == "message_delta") {
      message["stop_reason"] = e.data["delta"]["stop_reason"];
      message["usage"] = e.data["usage"];
    }
  }
  EXPECT_EQ(events.front().name, "message_start");
  EXPECT_EQ(events.back().name, "message_stop");
  EXPECT_EQ(message["content"], whole["content"]);
  EXPECT_EQ(message["stop_reason"], whole["stop_reason"]);
  EXPECT_EQ(message["usage"], whole["usage"]);
}

TEST(ResponsesReply, StreamAddsUpToTheResponse) {
  const ParsedOutput parsed = Reply();
  const GenerateStats stats = Stats();
  const std::string stop, mode = "ar";
  const FinishedReply done{parsed, FinishReason::kToolCalls, stop, stats, mode};
  ResponsesReplyFormat f(ResponseHeader{"resp_7", "response", 0, "m"});
  const OJson whole = f.Reply(done);
  EXPECT_EQ(whole["status"], "completed");
  EXPECT_EQ(whole["output"], OJson::parse(R"([
    {"type": "reasoning", "id": "rs_7_0", "summary": [], "content": [{"type": "reasoning_text", "text": "why"}], "status": "completed"},
    {"type": "message", "id": "msg_7_1", "status": "completed", "role": "assistant",
     "content": [{"type": "output_text", "text": "Let me check.", "annotations": [], "logprobs": []}]},
    {"type": "function_call", "id": "fc_7_2", "call_id": "call_1", "name": "f", "arguments": "{\"x\": 1}", "status": "completed"}])"));
  EXPECT_EQ(whole["usage"], OJson::parse(R"({"input_tokens": 30, "input_tokens_details": {"cached_tokens": 20},
                                             "output_tokens": 7, "total_tokens": 37})"));

  SseEvents events;
  f.Start(events);
  for (const OutputDelta& d : Deltas()) f.Delta(d, events);
  f.End(done, events);
  std::string text, reasoning, args;
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].data["sequence_number"], i);
    EXPECT_EQ(events[i].name, events[i].data["type"]);
    if (events[i].name == "response.output_text.delta") text += events[i].data["delta"].get<std::string>();
    if (events[i].name == "response.reasoning_text.delta") reasoning += events[i].data["delta"].get<std::string>();
    if (events[i].name == "response.function_call_arguments.delta") args += events[i].data["delta"].get<std::string>();
  }
  EXPECT_EQ(text, "Let me check.");
  EXPECT_EQ(reasoning, "why");
  EXPECT_EQ(args, R"({"x": 1})");
  EXPECT_EQ(events.front().name, "response.created");
  EXPECT_EQ(events.front().data["response"]["status"], "in_progress");
  EXPECT_EQ(events.back().name, "response.completed");
  OJson final = events.back().data["response"];
  EXPECT_EQ(final["output"], whole["output"]);
  EXPECT_EQ(final["usage"], whole["usage"]);

  const FinishedReply cut{parsed, FinishReason::kLength, stop, stats, mode};
  const OJson incomplete = f.Reply(cut);
  EXPECT_EQ(incomplete["status"], "incomplete");
  EXPECT_EQ(incomplete["incomplete_details"], OJson::parse(R"({"reason": "max_output_tokens"})"));
}

TEST(StopMatcher, NamesTheSequenceThatMatchedFirst) {
  StopMatcher m({"zz", "b"});
  EXPECT_EQ(m.Push("a bzz"), "a ");
  EXPECT_EQ(m.matched(), "b");
  StopMatcher none({"q"});
  none.Push("abc");
  EXPECT_EQ(none.matched(), "");
}

TEST(Access, BearerOrXApiKey) {
  const AccessPolicy policy{"127.0.0.1", "k"};
  const auto status = [&](std::vector<std::pair<std::string, std::string>> headers) {
    httplib::Request req;
    for (auto& [k, v] : headers) req.headers.emplace(k, v);
    try {
      CheckApiKey(policy, req);
    } catch (const ApiError& e) {
      return e.status();
    }
    return 200;
  };
  EXPECT_EQ(status({{"Authorization", "Bearer k"}}), 200);
  EXPECT_EQ(status({{"x-api-key", "k"}}), 200);
  EXPECT_EQ(status({{"X-Api-Key", "k"}}), 200);  // header names are case-insensitive
  EXPECT_EQ(status({}), 401);
  EXPECT_EQ(status({{"x-api-key", "j"}}), 401);
  EXPECT_EQ(status({{"Authorization", "Bearer k"}, {"x-api-key", "j"}}), 401);
  EXPECT_EQ(status({{"Authorization", "k"}}), 401);
}

}  // namespace
}  // namespace dflash::serve
