#include "serve/responses_format.h"

#include "serve/chat_translation.h"
#include "serve/json_fields.h"

namespace dflash::serve {

namespace {

constexpr int64_t kMaxTokens = 1 << 30;

[[noreturn]] void NotStored(const std::string& field) {
  throw BadRequest("'" + field + "' is not supported: this server does not store responses or conversations; "
                   "send the whole conversation in 'input'",
                   field);
}

std::string TextOf(const OJson& content, const std::string& where) {
  if (content.is_string()) return content.get<std::string>();
  return JoinedText(content, where, {"input_text", "output_text", "text"}, "");
}

// The text of a reasoning item: its reasoning_text content, else its summary.
std::string ReasoningText(const Fields& item, const std::string& at) {
  if (const OJson* content = item.Array("content"); content && !content->empty()) {
    return JoinedText(*content, at + "content", {"reasoning_text"}, "");
  }
  const OJson* summary = item.Array("summary");
  return summary ? JoinedText(*summary, at + "summary", {"summary_text"}, "\n\n") : "";
}

// Input items onto chat messages. Function calls join the assistant message before them (the
// turn the model wrote); a reasoning item goes to the assistant message after it.
OJson Messages(const Fields& f) {
  OJson messages = OJson::array();
  if (auto instructions = f.String("instructions")) messages.push_back({{"role", "system"}, {"content", *instructions}});
  const OJson* input = f.Get("input");
  if (!input) throw BadRequest("'input' is required", "input");
  if (input->is_string()) {
    messages.push_back({{"role", "user"}, {"content", *input}});
    return messages;
  }
  if (!input->is_array() || input->empty()) f.Wrong("input", "a string or a non-empty array of items");
  std::string reasoning;
  const auto assistant_turn = [&](OJson& msg) {
    if (!reasoning.empty()) msg["reasoning_content"] = reasoning;
    reasoning.clear();
  };
  for (size_t i = 0; i < input->size(); ++i) {
    const std::string at = "input[" + std::to_string(i) + "]";
    if (!(*input)[i].is_object()) throw BadRequest("'" + at + "' must be an object", at);
    const Fields item((*input)[i], at + ".");
    const std::string type = item.String("type").value_or("message");
    if (type == "message") {
      const auto role = item.String("role");
      if (role != "user" && role != "assistant" && role != "system" && role != "developer") {
        throw BadRequest("'" + at + ".role' must be user, assistant, system or developer", at + ".role");
      }
      const OJson* content = item.Get("content");
      if (!content) throw BadRequest("'" + at + ".content' is required", at + ".content");
      OJson msg = {{"role", *role}, {"content", TextOf(*content, at + ".content")}};
      if (*role == "assistant") assistant_turn(msg);
      messages.push_back(std::move(msg));
    } else if (type == "function_call") {
      const std::string call_id = item.RequiredString("call_id");
      const std::string name = item.RequiredString("name");
      const std::string args_text = item.String("arguments").value_or("{}");
      OJson args = OJson::parse(args_text, nullptr, /*allow_exceptions=*/false);
      if (args.is_discarded() || !args.is_object()) {
        throw BadRequest("'" + at + ".arguments' must be a JSON object encoded as a string", at + ".arguments");
      }
      CheckDepth(args, "'" + at + ".arguments'", at + ".arguments");
      if (messages.empty() || messages.back()["role"] != "assistant") {
        messages.push_back({{"role", "assistant"}, {"content", ""}});
        assistant_turn(messages.back());
      }
      AddToolCall(messages, {{"id", call_id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", std::move(args)}}}});
    } else if (type == "function_call_output") {
      const std::string call_id = item.RequiredString("call_id");
      const OJson* output = item.Get("output");
      if (!output) throw BadRequest("'" + at + ".output' is required", at + ".output");
      messages.push_back({{"role", "tool"}, {"tool_call_id", call_id}, {"content", TextOf(*output, at + ".output")}});
    } else if (type == "reasoning") {
      reasoning += ReasoningText(item, at + ".");
    } else {
      throw BadRequest("'" + at + ".type' must be message, function_call, function_call_output or reasoning, got '" + type + "'",
                       at + ".type");
    }
  }
  return messages;
}

// Function tools: {"type": "function", "name", "description", "parameters", "strict"}.
OJson FunctionParameters(const Fields& t) {
  const std::string type = t.String("type").value_or("");
  if (type != "function") {
    throw BadRequest("'" + t.Name("type") + "' must be 'function' (built-in tools are not supported), got '" + type + "'",
                     t.Name("type"));
  }
  t.Bool("strict");  // no constrained decoding: the template's own call format is what the model writes
  const OJson* parameters = t.Object("parameters");
  return parameters ? *parameters : OJson();
}

OJson ChatToolChoice(const OJson& choice) {
  if (choice.is_string()) {
    const std::string c = choice.get<std::string>();
    if (c == "auto" || c == "none" || c == "required") return c;
    throw BadRequest("'tool_choice' must be 'auto', 'none', 'required' or {\"type\": \"function\", \"name\": ...}, got '" + c + "'",
                     "tool_choice");
  }
  if (!choice.is_object()) throw BadRequest("'tool_choice' must be a string or an object", "tool_choice");
  const Fields c(choice, "tool_choice.");
  const std::string type = c.String("type").value_or("");
  if (type != "function") {
    throw BadRequest("'tool_choice.type' must be 'function' (other tool choices are not supported), got '" + type + "'",
                     "tool_choice.type");
  }
  return {{"type", "function"}, {"function", {{"name", c.RequiredString("name")}}}};
}

OJson Usage(const GenerateStats& s) {
  return {{"input_tokens", s.prompt_tokens},
          {"input_tokens_details", {{"cached_tokens", s.cached_tokens}}},
          {"output_tokens", s.completion_tokens},
          {"total_tokens", s.prompt_tokens + s.completion_tokens}};
}

const char* ItemPrefix(BlockKind k) {
  switch (k) {
    case BlockKind::kReasoning: return "rs_";
    case BlockKind::kText: return "msg_";
    case BlockKind::kToolCall: return "fc_";
  }
  return "";
}

OJson TextPart(const ReplyBlock& b, const std::string& text) {
  if (b.kind == BlockKind::kReasoning) return {{"type", "reasoning_text"}, {"text", text}};
  return {{"type", "output_text"}, {"text", text}, {"annotations", OJson::array()}, {"logprobs", OJson::array()}};
}

// An output item; `whole`: its final form, else as it opens (empty, in progress).
OJson ItemJson(const ReplyBlock& b, const std::string& id, bool whole) {
  const char* status = whole ? "completed" : "in_progress";
  const std::string text = whole ? b.text : "";
  switch (b.kind) {
    case BlockKind::kReasoning:
      return {{"type", "reasoning"}, {"id", id}, {"summary", OJson::array()},
              {"content", whole ? OJson::array({TextPart(b, text)}) : OJson::array()}, {"status", status}};
    case BlockKind::kText:
      return {{"type", "message"}, {"id", id}, {"status", status}, {"role", "assistant"},
              {"content", whole ? OJson::array({TextPart(b, text)}) : OJson::array()}};
    case BlockKind::kToolCall:
      return {{"type", "function_call"}, {"id", id}, {"call_id", b.call_id}, {"name", b.name}, {"arguments", text},
              {"status", status}};
  }
  return nullptr;
}

}  // namespace

ChatRequest ParseResponsesRequest(const OJson& body) {
  const Fields f(body, "");
  if (f.Get("previous_response_id")) NotStored("previous_response_id");
  if (f.Get("conversation")) NotStored("conversation");
  if (f.Bool("background").value_or(false)) {
    throw BadRequest("'background' is not supported: responses are not stored, so there is nothing to poll", "background");
  }
  if (const OJson* text = f.Object("text")) {
    if (const OJson* format = Fields(*text, "text.").Object("format")) {
      if (Fields(*format, "text.format.").String("type").value_or("text") != "text") {
        throw BadRequest("'text.format' is not supported by this server (only {\"type\": \"text\"})", "text.format");
      }
    }
  }
  OJson chat = ChatBodyFrom(body);
  if (const auto max = f.Int("max_output_tokens", 1, kMaxTokens)) chat["max_tokens"] = *max;
  chat["messages"] = Messages(f);
  if (const OJson* tools = f.Array("tools"); tools && !tools->empty()) chat["tools"] = ChatTools(*tools, FunctionParameters);
  if (const OJson* choice = f.Get("tool_choice")) chat["tool_choice"] = ChatToolChoice(*choice);
  if (const OJson* reasoning = f.Object("reasoning")) {
    const Fields rf(*reasoning, "reasoning.");
    rf.String("summary");
    if (const auto effort = rf.String("effort")) {
        SetTemplateVariable(chat, "reasoning_effort", *effort);
    }
  }
  return ParseChatRequest(chat);
}

ResponsesReplyFormat::ResponsesReplyFormat(ResponseHeader header) : h_(std::move(header)) {
  item_tag_ = h_.id.rfind("resp_", 0) == 0 ? h_.id.substr(5) : h_.id;
}

OJson ResponsesReplyFormat::Response(OJson output, const FinishedReply* r) const {
  // A reply cut short by max_output_tokens (or --timeout) is incomplete; tool calls complete it.
  const bool incomplete = r && r->finish_reason == FinishReason::kLength;
  const char* status = !r ? "in_progress" : incomplete ? "incomplete" : "completed";
  OJson j = {{"id", h_.id}, {"object", "response"}, {"created_at", h_.created}, {"status", status}, {"error", nullptr}};
  j["incomplete_details"] = incomplete ? OJson{{"reason", "max_output_tokens"}} : OJson();
  j["model"] = h_.model;
  j["output"] = std::move(output);
  j["parallel_tool_calls"] = true;
  j["previous_response_id"] = nullptr;
  j["store"] = false;
  j["usage"] = r ? Usage(r->stats) : OJson();
  if (r) j["timings"] = TimingsJson(r->stats, r->mode);
  return j;
}

OJson ResponsesReplyFormat::Reply(const FinishedReply& r) const {
  OJson output = OJson::array();
  int index = 0;
  for (const ReplyBlock& b : ReplyBlocks(r.parsed)) {
    output.push_back(ItemJson(b, ItemPrefix(b.kind) + item_tag_ + "_" + std::to_string(index++), true));
  }
  return Response(std::move(output), &r);
}

void ResponsesReplyFormat::Add(SseEvents& out, const char* type, OJson event) {
  OJson e = {{"type", type}, {"sequence_number", sequence_++}};
  e.update(event);
  out.push_back({type, std::move(e)});
}

// response.output_item.added / *.delta / *.done for each output item.
class ResponsesReplyFormat::Events final : public BlockSequencer::Sink {
 public:
  Events(ResponsesReplyFormat& f, SseEvents& out) : f_(f), out_(out) {}

  void Open(int index, const ReplyBlock& b) override {
    f_.Add(out_, "response.output_item.added", {{"output_index", index}, {"item", ItemJson(b, Id(index, b), false)}});
    if (b.kind != BlockKind::kToolCall) {
      f_.Add(out_, "response.content_part.added", Part(index, b, ""));
    }
  }
  void Grow(int index, const ReplyBlock& b, std::string_view piece) override {
    OJson e = {{"item_id", Id(index, b)}, {"output_index", index}};
    if (b.kind != BlockKind::kToolCall) e["content_index"] = 0;
    e["delta"] = piece;
    if (b.kind == BlockKind::kText) e["logprobs"] = OJson::array();
    f_.Add(out_, DeltaType(b.kind), std::move(e));
  }
  void Close(int index, const ReplyBlock& b) override {
    const std::string id = Id(index, b);
    switch (b.kind) {
      case BlockKind::kReasoning:
        f_.Add(out_, "response.reasoning_text.done", {{"item_id", id}, {"output_index", index}, {"content_index", 0}, {"text", b.text}});
        f_.Add(out_, "response.content_part.done", Part(index, b, b.text));
        break;
      case BlockKind::kText:
        f_.Add(out_, "response.output_text.done",
               {{"item_id", id}, {"output_index", index}, {"content_index", 0}, {"text", b.text}, {"logprobs", OJson::array()}});
        f_.Add(out_, "response.content_part.done", Part(index, b, b.text));
        break;
      case BlockKind::kToolCall:
        f_.Add(out_, "response.function_call_arguments.done",
               {{"item_id", id}, {"output_index", index}, {"name", b.name}, {"arguments", b.text}});
        break;
    }
    OJson item = ItemJson(b, id, true);
    f_.done_items_.push_back(item);
    f_.Add(out_, "response.output_item.done", {{"output_index", index}, {"item", std::move(item)}});
  }

 private:
  static const char* DeltaType(BlockKind k) {
    switch (k) {
      case BlockKind::kReasoning: return "response.reasoning_text.delta";
      case BlockKind::kText: return "response.output_text.delta";
      case BlockKind::kToolCall: return "response.function_call_arguments.delta";
    }
    return "";
  }
  std::string Id(int index, const ReplyBlock& b) const { return ItemPrefix(b.kind) + f_.item_tag_ + "_" + std::to_string(index); }
  OJson Part(int index, const ReplyBlock& b, const std::string& text) const {
    return {{"item_id", Id(index, b)}, {"output_index", index}, {"content_index", 0}, {"part", TextPart(b, text)}};
  }

  ResponsesReplyFormat& f_;
  SseEvents& out_;
};

void ResponsesReplyFormat::Start(SseEvents& out) {
  Add(out, "response.created", {{"response", Response(OJson::array(), nullptr)}});
  Add(out, "response.in_progress", {{"response", Response(OJson::array(), nullptr)}});
}

void ResponsesReplyFormat::Delta(const OutputDelta& d, SseEvents& out) {
  Events events(*this, out);
  blocks_.Push(d, events);
}

void ResponsesReplyFormat::End(const FinishedReply& r, SseEvents& out) {
  Events events(*this, out);
  blocks_.Finish(events);
  OJson response = Response(done_items_, &r);
  const char* type = response["status"] == "incomplete" ? "response.incomplete" : "response.completed";
  Add(out, type, {{"response", std::move(response)}});
}

void ResponsesReplyFormat::Error(const ApiError& e, SseEvents& out) {
  const OJson body = e.Body()["error"];
  Add(out, "error", {{"code", body["code"]}, {"message", body["message"]}, {"param", body["param"]}});
}

}  // namespace dflash::serve
