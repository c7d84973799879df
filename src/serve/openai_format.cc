#include "serve/openai_format.h"

namespace dflash::serve {

OJson UsageJson(const GenerateStats& s) {
  OJson u;
  u["prompt_tokens"] = s.prompt_tokens;
  u["completion_tokens"] = s.completion_tokens;
  u["total_tokens"] = s.prompt_tokens + s.completion_tokens;
  u["prompt_tokens_details"] = {{"cached_tokens", s.cached_tokens}};
  return u;
}

OJson TimingsJson(const GenerateStats& s, const std::string& mode) {
  OJson t;
  const int prefilled = s.prompt_tokens - s.cached_tokens;
  const int decoded = std::max(s.completion_tokens - 1, 0);  // the first token comes from the prefill
  t["prompt_n"] = prefilled;
  t["cache_n"] = s.cached_tokens;
  t["prompt_ms"] = s.prefill_ms;
  t["prompt_per_second"] = s.prefill_ms > 0 ? prefilled / (s.prefill_ms / 1000.0) : 0.0;
  t["predicted_n"] = s.completion_tokens;
  t["predicted_ms"] = s.decode_ms;
  t["predicted_per_second"] = s.decode_ms > 0 ? decoded / (s.decode_ms / 1000.0) : 0.0;
  t["draft_n"] = s.drafted;
  t["draft_n_accepted"] = s.accepted;
  t["tokens_per_cycle"] = s.tokens_per_cycle();
  t["acceptance"] = s.acceptance();
  t["cycles"] = s.cycles;
  t["mode"] = mode;
  t["ttft_ms"] = s.ttft_ms;
  return t;
}

OJson ResponseHeader::Json(const char* object_override) const {
  return {{"id", id}, {"object", object_override ? object_override : object}, {"created", created}, {"model", model}};
}

OJson ToolCallsJson(const std::vector<ToolCall>& calls, size_t first_index, bool with_index) {
  OJson out = OJson::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    OJson c;
    if (with_index) c["index"] = first_index + i;
    c["id"] = calls[i].id;
    c["type"] = "function";
    c["function"] = {{"name", calls[i].name}, {"arguments", calls[i].arguments}};
    out.push_back(c);
  }
  return out;
}

OJson ChatDeltaChunk(const ResponseHeader& h, const OutputDelta& d) {
  if (d.empty()) return nullptr;
  OJson delta = OJson::object();
  if (!d.reasoning_content.empty()) delta["reasoning_content"] = d.reasoning_content;
  if (!d.content.empty()) delta["content"] = d.content;
  if (!d.tool_calls.empty()) delta["tool_calls"] = ToolCallsJson(d.tool_calls, d.first_tool_index, true);
  OJson chunk = h.Json("chat.completion.chunk");
  chunk["choices"] = OJson::array({{{"index", 0}, {"delta", delta}, {"finish_reason", nullptr}}});
  return chunk;
}

OJson OpenAIReplyFormat::Reply(const FinishedReply& r) const {
  OJson body = h_.Json();
  OJson choice;
  choice["index"] = 0;
  if (chat_) {
    choice["message"] = r.parsed.ToMessage();
  } else {
    choice["text"] = r.parsed.content;
  }
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = FinishReasonName(r.finish_reason);
  body["choices"] = OJson::array({choice});
  body["usage"] = UsageJson(r.stats);
  body["timings"] = TimingsJson(r.stats, r.mode);
  return body;
}

void OpenAIReplyFormat::Start(SseEvents& out) {
  if (!chat_) return;
  OJson first = h_.Json("chat.completion.chunk");
  first["choices"] = OJson::array({{{"index", 0}, {"delta", {{"role", "assistant"}, {"content", ""}}}, {"finish_reason", nullptr}}});
  out.push_back({"", std::move(first)});
}

void OpenAIReplyFormat::Delta(const OutputDelta& d, SseEvents& out) {
  if (chat_) {
    if (OJson chunk = ChatDeltaChunk(h_, d); !chunk.is_null()) out.push_back({"", std::move(chunk)});
    return;
  }
  OJson chunk = h_.Json();
  chunk["choices"] = OJson::array({{{"index", 0}, {"text", d.content}, {"logprobs", nullptr}, {"finish_reason", nullptr}}});
  out.push_back({"", std::move(chunk)});
}

void OpenAIReplyFormat::End(const FinishedReply& r, SseEvents& out) {
  const char* object = chat_ ? "chat.completion.chunk" : nullptr;
  OJson last = h_.Json(object);
  OJson choice = {{"index", 0}};
  if (chat_) {
    choice["delta"] = OJson::object();
  } else {
    choice["text"] = "";
    choice["logprobs"] = nullptr;
  }
  choice["finish_reason"] = FinishReasonName(r.finish_reason);
  last["choices"] = OJson::array({choice});
  last["timings"] = TimingsJson(r.stats, r.mode);
  if (!include_usage_) last["usage"] = UsageJson(r.stats);
  out.push_back({"", std::move(last)});
  if (include_usage_) {
    OJson usage = h_.Json(object);
    usage["choices"] = OJson::array();
    usage["usage"] = UsageJson(r.stats);
    usage["timings"] = TimingsJson(r.stats, r.mode);
    out.push_back({"", std::move(usage)});
  }
}

}  // namespace dflash::serve
