#include "serve/anthropic_format.h"

#include "serve/chat_translation.h"
#include "serve/json_fields.h"

namespace dflash::serve {

namespace {

constexpr int64_t kMaxTokens = 1 << 30;
// Anthropic's blocks are paragraphs of one turn; joined, they stay apart.
constexpr const char* kBlockSeparator = "\n\n";

std::string TextOf(const OJson& content, const std::string& where) {
  if (content.is_string()) return content.get<std::string>();
  return JoinedText(content, where, {"text"}, kBlockSeparator);
}

const OJson& Required(const Fields& f, const std::string& key, const char* expected) {
  const OJson* v = f.Get(key);
  if (!v) throw BadRequest("'" + f.Name(key) + "' is required (" + expected + ")", f.Name(key));
  return *v;
}

// One message's blocks, in order, onto chat messages: user text (joined) and tool results (one
// tool message each); assistant text, thinking (reasoning_content) and tool uses (tool_calls).
void AddMessage(const OJson& m, const std::string& at, OJson& messages) {
  if (!m.is_object()) throw BadRequest("'" + at + "' must be an object", at);
  const Fields mf(m, at + ".");
  const auto role = mf.String("role");
  if (role != "user" && role != "assistant") {
    throw BadRequest("'" + at + ".role' must be 'user' or 'assistant'", at + ".role");
  }
  const OJson& content = Required(mf, "content", "a string or an array of blocks");
  if (content.is_string()) {
    messages.push_back({{"role", *role}, {"content", content}});
    return;
  }
  if (!content.is_array()) mf.Wrong("content", "a string or an array of blocks");
  OJson msg = {{"role", *role}, {"content", ""}};
  std::string text, reasoning;
  bool has_text = false;
  const auto flush_user_text = [&] {
    if (has_text) messages.push_back({{"role", "user"}, {"content", text}});
    text.clear();
    has_text = false;
  };
  for (size_t j = 0; j < content.size(); ++j) {
    const std::string bat = at + ".content[" + std::to_string(j) + "]";
    if (!content[j].is_object()) throw BadRequest("'" + bat + "' must be an object", bat);
    const Fields b(content[j], bat + ".");
    const std::string type = b.String("type").value_or("");
    const bool user = *role == "user";
    if (type == "text") {
      const auto t = b.String("text");
      if (!t) throw BadRequest("'" + bat + ".text' is required (a string)", bat + ".text");
      if (has_text) text += kBlockSeparator;
      text += *t;
      has_text = true;
    } else if (type == "tool_result" && user) {
      flush_user_text();
      const std::string id = b.RequiredString("tool_use_id");
      const OJson* result = b.Get("content");
      b.Bool("is_error");
      messages.push_back({{"role", "tool"}, {"tool_call_id", id}, {"content", result ? TextOf(*result, bat + ".content") : ""}});
    } else if (type == "tool_use" && !user) {
      const std::string id = b.RequiredString("id");
      const std::string name = b.RequiredString("name");
      const OJson* input = b.Object("input");
      if (!input) throw BadRequest("'" + bat + ".input' is required (an object)", bat + ".input");
      if (!msg.contains("tool_calls")) msg["tool_calls"] = OJson::array();
      msg["tool_calls"].push_back({{"id", id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", *input}}}});
    } else if (type == "thinking" && !user) {
      const auto t = b.String("thinking");
      if (!t) throw BadRequest("'" + bat + ".thinking' is required (a string)", bat + ".thinking");
      reasoning += *t;
    } else if (type == "redacted_thinking" && !user) {
      // Encrypted by Anthropic for its own models: nothing a template could show.
    } else {
      throw BadRequest("'" + bat + ".type' must be " +
                           (user ? "'text' or 'tool_result'" : "'text', 'tool_use', 'thinking' or 'redacted_thinking'") +
                           " in a " + *role + " message, got '" + type + "'",
                       bat + ".type");
    }
  }
  if (*role == "user") {
    flush_user_text();
    return;
  }
  msg["content"] = text;
  if (!reasoning.empty()) msg["reasoning_content"] = reasoning;
  messages.push_back(std::move(msg));
}

// Client tools: {"name", "description", "input_schema"}.
OJson InputSchema(const Fields& t) {
  if (const auto type = t.String("type"); type && *type != "custom") {
    throw BadRequest("'" + t.Name("type") + "': server tools ('" + *type + "') are not supported, only client tools with input_schema",
                     t.Name("type"));
  }
  const OJson* schema = t.Object("input_schema");
  if (!schema) throw BadRequest("'" + t.Name("input_schema") + "' is required (an object)", t.Name("input_schema"));
  return *schema;
}

OJson ChatToolChoice(const Fields& f) {
  const OJson* choice = f.Object("tool_choice");
  const Fields c(*choice, "tool_choice.");
  c.Bool("disable_parallel_tool_use");  // the template decides how many calls a turn has
  const std::string type = c.String("type").value_or("");
  if (type == "auto") return "auto";
  if (type == "any") return "required";
  if (type == "none") return "none";
  if (type == "tool") return {{"type", "function"}, {"function", {{"name", c.RequiredString("name")}}}};
  throw BadRequest("'tool_choice.type' must be 'auto', 'any', 'tool' or 'none', got '" + type + "'", "tool_choice.type");
}

bool ThinkingEnabled(const Fields& f) {
  const Fields t(*f.Object("thinking"), "thinking.");
  const std::string type = t.String("type").value_or("");
  t.Int("budget_tokens", 0, kMaxTokens);  // the template has no budget: the model stops thinking itself
  if (type != "enabled" && type != "disabled" && type != "adaptive") {
    throw BadRequest("'thinking.type' must be 'enabled', 'adaptive' or 'disabled', got '" + type + "'", "thinking.type");
  }
  return type != "disabled";
}

OJson Usage(const GenerateStats& s) {
  return {{"input_tokens", s.prompt_tokens - s.cached_tokens},
          {"output_tokens", s.completion_tokens},
          {"cache_read_input_tokens", s.cached_tokens}};
}

OJson BlockJson(const ReplyBlock& b, bool whole) {
  switch (b.kind) {
    case BlockKind::kReasoning:
      // Anthropic signs its own models' thinking; there is nothing to sign here.
      return {{"type", "thinking"}, {"thinking", whole ? b.text : ""}, {"signature", ""}};
    case BlockKind::kText:
      return {{"type", "text"}, {"text", whole ? b.text : ""}};
    case BlockKind::kToolCall:
      return {{"type", "tool_use"}, {"id", b.call_id}, {"name", b.name},
              {"input", whole ? OJson::parse(b.text) : OJson::object()}};
  }
  return nullptr;
}

OJson DeltaJson(const ReplyBlock& b, std::string_view piece) {
  switch (b.kind) {
    case BlockKind::kReasoning: return {{"type", "thinking_delta"}, {"thinking", piece}};
    case BlockKind::kText: return {{"type", "text_delta"}, {"text", piece}};
    case BlockKind::kToolCall: return {{"type", "input_json_delta"}, {"partial_json", piece}};
  }
  return nullptr;
}

}  // namespace

ChatRequest ParseAnthropicRequest(const OJson& body, bool count_tokens) {
  const Fields f(body, "");
  OJson chat = ChatBodyFrom(body);
  if (!count_tokens) {
    const auto max_tokens = f.Int("max_tokens", 1, kMaxTokens);
    if (!max_tokens) throw BadRequest("'max_tokens' is required", "max_tokens");
    chat["max_tokens"] = *max_tokens;
  }
  std::vector<std::string> stops;
  if (const OJson* s = f.Array("stop_sequences")) {
    for (size_t i = 0; i < s->size(); ++i) {
      const std::string at = "stop_sequences[" + std::to_string(i) + "]";
      if (!(*s)[i].is_string() || (*s)[i].get<std::string>().empty()) throw BadRequest("'" + at + "' must be a non-empty string", at);
      stops.push_back((*s)[i]);
    }
  }
  OJson messages = OJson::array();
  if (const OJson* system = f.Get("system")) {
    messages.push_back({{"role", "system"}, {"content", TextOf(*system, "system")}});
  }
  const OJson* input = f.Array("messages");
  if (!input || input->empty()) throw BadRequest("'messages' is required (a non-empty array)", "messages");
  for (size_t i = 0; i < input->size(); ++i) AddMessage((*input)[i], "messages[" + std::to_string(i) + "]", messages);
  chat["messages"] = std::move(messages);
  if (const OJson* tools = f.Array("tools"); tools && !tools->empty()) chat["tools"] = ChatTools(*tools, InputSchema);
  if (f.Object("tool_choice")) chat["tool_choice"] = ChatToolChoice(f);
  if (f.Object("thinking")) {
    SetTemplateVariable(chat, "enable_thinking", ThinkingEnabled(f));
  }
  ChatRequest r = ParseChatRequest(chat);
  r.stop = std::move(stops);  // Anthropic sets no limit on their number, OpenAI's `stop` does
  return r;
}

OJson AnthropicErrorBody(const ApiError& e) {
  const char* type = "api_error";
  switch (e.status()) {
    case 400: case 415: type = "invalid_request_error"; break;
    case 401: type = "authentication_error"; break;
    case 403: type = "permission_error"; break;
    case 404: type = "not_found_error"; break;
    case 413: type = "request_too_large"; break;
    case 429: type = "rate_limit_error"; break;
    case 503: type = "overloaded_error"; break;
    default: break;
  }
  return {{"type", "error"}, {"error", {{"type", type}, {"message", e.what()}}}};
}

const char* AnthropicStopReason(FinishReason r, const std::string& stop_sequence) {
  switch (r) {
    case FinishReason::kLength: return "max_tokens";
    case FinishReason::kToolCalls: return "tool_use";
    case FinishReason::kStop:
    case FinishReason::kCancelled: break;
  }
  return stop_sequence.empty() ? "end_turn" : "stop_sequence";
}

OJson AnthropicReplyFormat::Reply(const FinishedReply& r) const {
  OJson m = {{"id", h_.id}, {"type", "message"}, {"role", "assistant"}, {"model", h_.model}};
  m["content"] = OJson::array();
  for (const ReplyBlock& b : ReplyBlocks(r.parsed)) m["content"].push_back(BlockJson(b, true));
  m["stop_reason"] = AnthropicStopReason(r.finish_reason, r.stop_sequence);
  m["stop_sequence"] = r.stop_sequence.empty() ? OJson() : OJson(r.stop_sequence);
  m["usage"] = Usage(r.stats);
  m["timings"] = TimingsJson(r.stats, r.mode);
  return m;
}

// content_block_start / _delta / _stop for each block.
class AnthropicReplyFormat::Events final : public BlockSequencer::Sink {
 public:
  explicit Events(SseEvents& out) : out_(out) {}
  void Open(int index, const ReplyBlock& b) override {
    out_.push_back({"content_block_start", {{"type", "content_block_start"}, {"index", index}, {"content_block", BlockJson(b, false)}}});
  }
  void Grow(int index, const ReplyBlock& b, std::string_view piece) override {
    out_.push_back({"content_block_delta", {{"type", "content_block_delta"}, {"index", index}, {"delta", DeltaJson(b, piece)}}});
  }
  void Close(int index, const ReplyBlock&) override {
    out_.push_back({"content_block_stop", {{"type", "content_block_stop"}, {"index", index}}});
  }

 private:
  SseEvents& out_;
};

void AnthropicReplyFormat::Start(SseEvents& out) {
  OJson m = {{"id", h_.id}, {"type", "message"}, {"role", "assistant"}, {"model", h_.model}, {"content", OJson::array()},
             {"stop_reason", nullptr}, {"stop_sequence", nullptr},
             {"usage", {{"input_tokens", prompt_tokens_}, {"output_tokens", 0}}}};
  out.push_back({"message_start", {{"type", "message_start"}, {"message", std::move(m)}}});
}

void AnthropicReplyFormat::Delta(const OutputDelta& d, SseEvents& out) {
  Events events(out);
  blocks_.Push(d, events);
}

void AnthropicReplyFormat::End(const FinishedReply& r, SseEvents& out) {
  Events events(out);
  blocks_.Finish(events);
  OJson delta = {{"stop_reason", AnthropicStopReason(r.finish_reason, r.stop_sequence)},
                 {"stop_sequence", r.stop_sequence.empty() ? OJson() : OJson(r.stop_sequence)}};
  out.push_back({"message_delta", {{"type", "message_delta"}, {"delta", std::move(delta)}, {"usage", Usage(r.stats)},
                                   {"timings", TimingsJson(r.stats, r.mode)}}});
  out.push_back({"message_stop", {{"type", "message_stop"}}});
}

}  // namespace dflash::serve
