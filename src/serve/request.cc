#include "serve/request.h"

#include <cmath>
#include <limits>

#include "core/error.h"
#include "serve/api_error.h"
#include "serve/json_fields.h"

namespace dflash::serve {

namespace {

[[noreturn]] void Unsupported(const std::string& field, const std::string& what) {
  throw BadRequest("'" + field + "' is not supported by this server" + what, field);
}

// Fields we do not implement: accepted only at their no-op value.
void RejectUnsupported(const Fields& f) {
  if (auto n = f.Int("n", 1, 128); n && *n != 1) Unsupported("n", " (only n = 1)");
  if (auto v = f.Int("best_of", 1, 128); v && *v != 1) Unsupported("best_of", " (only 1)");
  if (auto v = f.Number("typical_p", 0, 1, true); v && *v != 1) Unsupported("typical_p", " (only 1)");
  if (const OJson* b = f.Object("logit_bias"); b && !b->empty()) Unsupported("logit_bias", "");
  if (const OJson* lp = f.Get("logprobs")) {
    if (lp->is_boolean() ? lp->get<bool>() : !(lp->is_number_integer() && lp->get<int64_t>() == 0)) {
      Unsupported("logprobs", "");
    }
  }
  if (auto v = f.Int("top_logprobs", 0, 20); v && *v != 0) Unsupported("top_logprobs", "");
  if (const OJson* rf = f.Object("response_format")) {
    const auto it = rf->find("type");
    if (it == rf->end() || !it->is_string() || *it != "text") Unsupported("response_format", " (only {\"type\": \"text\"})");
  }
}

GenerationRequest ParseCommon(const Fields& f) {
  GenerationRequest r;
  RejectUnsupported(f);
  r.model = f.String("model").value_or("");
  r.stream = f.Bool("stream").value_or(false);
  if (const OJson* so = f.Object("stream_options")) {
    r.include_usage = Fields(*so, "stream_options.").Bool("include_usage").value_or(false);
  }
  constexpr int64_t kMaxTokens = 1 << 30;
  auto max_tokens = f.Int("max_completion_tokens", 1, kMaxTokens);
  if (!max_tokens) max_tokens = f.Int("max_tokens", 1, kMaxTokens);
  if (max_tokens) r.max_tokens = static_cast<int>(*max_tokens);
  r.temperature = f.Number("temperature", 0, 2);
  r.top_p = f.Number("top_p", 0, 1, /*lo_open=*/true);
  if (auto k = f.Int("top_k", 0, 1 << 24)) r.top_k = static_cast<int>(*k);
  r.min_p = f.Number("min_p", 0, 1);
  r.presence_penalty = f.Number("presence_penalty", -2, 2);
  r.frequency_penalty = f.Number("frequency_penalty", -2, 2);
  r.repetition_penalty = f.Number("repetition_penalty", 0, 1e9, /*lo_open=*/true);
  if (auto repeat = f.Number("repeat_penalty", 0, 1e9, /*lo_open=*/true)) {
    if (r.repetition_penalty && *r.repetition_penalty != *repeat) {
      throw BadRequest("'repetition_penalty' and 'repeat_penalty' (its llama.cpp name) differ", "repeat_penalty");
    }
    r.repetition_penalty = repeat;
  }
  if (auto s = f.String("spec_sampling")) {
    try {
      r.spec_sampling = ParseSpecSampling(*s);
    } catch (const Error& e) {
      throw BadRequest(e.what(), "spec_sampling");
    }
  }
  if (auto s = f.Int("seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max())) {
    r.seed = static_cast<uint64_t>(*s);
  }
  if (const OJson* stop = f.Get("stop")) {
    if (stop->is_string()) {
      r.stop.push_back(stop->get<std::string>());
    } else if (stop->is_array()) {
      for (const OJson& s : *stop) {
        if (!s.is_string()) throw BadRequest("'stop' entries must be strings", "stop");
        r.stop.push_back(s.get<std::string>());
      }
    } else {
      f.Wrong("stop", "a string or an array of strings");
    }
    if (r.stop.size() > 4) throw BadRequest("'stop' takes at most 4 sequences", "stop");
    for (const std::string& s : r.stop) {
      if (s.empty()) throw BadRequest("'stop' sequences must not be empty", "stop");
    }
  }
  r.ignore_eos = f.Bool("ignore_eos").value_or(false);
  r.scripted_output = f.String("dflash_scripted_output");
  return r;
}

// OpenAI content: a string, or an array of {"type": "text", "text": ...} parts, joined.
OJson ContentText(const OJson& content, const std::string& where) {
  if (content.is_null() || content.is_string()) return content;
  if (!content.is_array()) throw BadRequest("'" + where + "' must be a string or an array of parts", where);
  std::string text;
  for (const OJson& part : content) {
    if (!part.is_object()) throw BadRequest("'" + where + "' parts must be objects", where);
    const auto type = part.find("type");
    const auto t = part.find("text");
    if (type == part.end() || *type != "text" || t == part.end() || !t->is_string()) {
      throw BadRequest("'" + where + "': only text parts ({\"type\": \"text\", \"text\": ...}) are supported", where);
    }
    text += t->get<std::string>();
  }
  return text;
}

OJson ParseToolCalls(const OJson& calls, const std::string& where) {
  if (!calls.is_array()) throw BadRequest("'" + where + "' must be an array", where);
  OJson out = OJson::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    const std::string at = where + "[" + std::to_string(i) + "]";
    if (!calls[i].is_object()) throw BadRequest("'" + at + "' must be an object", at);
    const Fields c(calls[i], at + ".");
    const OJson* fn = c.Object("function");
    if (!fn) throw BadRequest("'" + at + ".function' is required", at + ".function");
    const Fields f(*fn, at + ".function.");
    const auto name = f.String("name");
    if (!name || name->empty()) throw BadRequest("'" + at + ".function.name' is required", at + ".function.name");
    OJson call = calls[i];
    // Templates iterate arguments as a mapping (Qwen3-Coder) or print them (Qwen3); OpenAI
    // sends a JSON string, so hand templates the object it encodes, as llama.cpp does.
    if (const OJson* args = f.Get("arguments"); args && args->is_string()) {
      OJson parsed = OJson::parse(args->get<std::string>(), nullptr, /*allow_exceptions=*/false);
      if (parsed.is_discarded() || !parsed.is_object()) {
        throw BadRequest("'" + at + ".function.arguments' must be a JSON object encoded as a string", at + ".function.arguments");
      }
      CheckDepth(parsed, "'" + at + ".function.arguments'", at + ".function.arguments");  // before the copy below
      call["function"]["arguments"] = parsed;
    } else if (args && !args->is_object()) {
      f.Wrong("arguments", "a JSON string or an object");
    }
    out.push_back(call);
  }
  return out;
}

OJson ParseMessages(const Fields& f) {
  const OJson* messages = f.Array("messages");
  if (!messages) throw BadRequest("'messages' is required", "messages");
  if (messages->empty()) throw BadRequest("'messages' must not be empty", "messages");
  OJson out = OJson::array();
  for (size_t i = 0; i < messages->size(); ++i) {
    const std::string at = "messages[" + std::to_string(i) + "]";
    const OJson& m = (*messages)[i];
    if (!m.is_object()) throw BadRequest("'" + at + "' must be an object", at);
    const Fields mf(m, at + ".");
    const auto role = mf.String("role");
    if (!role) throw BadRequest("'" + at + ".role' is required", at + ".role");
    if (*role != "system" && *role != "developer" && *role != "user" && *role != "assistant" && *role != "tool") {
      throw BadRequest("'" + at + ".role' must be system, developer, user, assistant or tool, got '" + *role + "'", at + ".role");
    }
    OJson msg = m;
    msg["role"] = *role == "developer" ? "system" : *role;  // templates know system, not developer
    const auto content = m.find("content");
    msg["content"] = content == m.end() ? OJson() : ContentText(*content, at + ".content");
    if (const OJson* calls = mf.Get("tool_calls")) {
      if (*role != "assistant") throw BadRequest("'" + at + ".tool_calls' is only valid on assistant messages", at + ".tool_calls");
      msg["tool_calls"] = ParseToolCalls(*calls, at + ".tool_calls");
    }
    if (msg["content"].is_null() && !msg.contains("tool_calls")) {
      throw BadRequest("'" + at + ".content' is required", at + ".content");
    }
    if (msg["content"].is_null()) msg["content"] = "";  // templates concatenate it
    mf.String("tool_call_id");
    mf.String("name");
    mf.String("reasoning_content");
    out.push_back(msg);
  }
  return out;
}

void ParseTools(const Fields& f, ChatRequest& r) {
  if (const OJson* tools = f.Array("tools"); tools && !tools->empty()) {
    for (size_t i = 0; i < tools->size(); ++i) {
      const std::string at = "tools[" + std::to_string(i) + "]";
      if (!(*tools)[i].is_object()) throw BadRequest("'" + at + "' must be an object", at);
      const Fields t((*tools)[i], at + ".");
      if (t.String("type").value_or("function") != "function") throw BadRequest("'" + at + ".type' must be 'function'", at + ".type");
      const OJson* fn = t.Object("function");
      if (!fn) throw BadRequest("'" + at + ".function' is required", at + ".function");
      const Fields tf(*fn, at + ".function.");
      const auto name = tf.String("name");
      if (!name || name->empty()) throw BadRequest("'" + at + ".function.name' is required", at + ".function.name");
      tf.String("description");
      tf.Object("parameters");
    }
    r.tools = *tools;
  }
  const OJson* choice = f.Get("tool_choice");
  if (!choice) return;
  if (choice->is_string()) {
    const std::string c = choice->get<std::string>();
    if (c == "auto") {
      r.tool_choice = ToolChoice::kAuto;
    } else if (c == "none") {
      r.tool_choice = ToolChoice::kNone;
    } else if (c == "required") {
      r.tool_choice = ToolChoice::kRequired;
    } else {
      throw BadRequest("'tool_choice' must be 'auto', 'none', 'required' or a named function, got '" + c + "'", "tool_choice");
    }
  } else if (choice->is_object()) {
    const Fields cf(*choice, "tool_choice.");
    const OJson* fn = cf.Object("function");
    const auto name = fn ? Fields(*fn, "tool_choice.function.").String("name") : std::nullopt;
    if (!name) throw BadRequest("'tool_choice.function.name' is required", "tool_choice");
    r.tool_choice = ToolChoice::kNamed;
    r.tool_name = *name;
  } else {
    f.Wrong("tool_choice", "a string or an object");
  }
  if (r.tool_choice == ToolChoice::kRequired || r.tool_choice == ToolChoice::kNamed) {
    if (r.tools.is_null()) throw BadRequest("'tool_choice' requires 'tools'", "tool_choice");
  }
  if (r.tool_choice == ToolChoice::kNamed) {
    bool found = false;
    for (const OJson& t : r.tools) found = found || t["function"]["name"] == r.tool_name;
    if (!found) throw BadRequest("'tool_choice' names '" + r.tool_name + "', which is not in 'tools'", "tool_choice");
  }
}

}  // namespace

OJson ParseBody(const std::string& body) {
  OJson j = OJson::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw BadRequest("the request body is not valid JSON");
  if (!j.is_object()) throw BadRequest(std::string("the request body must be a JSON object, got ") + j.type_name());
  // Before anything copies it: copies recurse once per level, and 100k levels fit in 200 KB.
  CheckDepth(j, "the request body", "");
  return j;
}

ChatRequest ParseChatRequest(const OJson& body) {
  const Fields f(body, "");
  ChatRequest r;
  static_cast<GenerationRequest&>(r) = ParseCommon(f);
  r.messages = ParseMessages(f);
  ParseTools(f, r);
  if (const OJson* kw = f.Object("chat_template_kwargs")) r.chat_template_kwargs = *kw;
  return r;
}

CompletionRequest ParseCompletionRequest(const OJson& body) {
  const Fields f(body, "");
  CompletionRequest r;
  static_cast<GenerationRequest&>(r) = ParseCommon(f);
  if (f.Bool("echo").value_or(false)) Unsupported("echo", "");
  if (auto suffix = f.String("suffix"); suffix && !suffix->empty()) Unsupported("suffix", "");
  const OJson* p = f.Get("prompt");
  if (!p) throw BadRequest("'prompt' is required", "prompt");
  const OJson* one = p;
  if (p->is_array() && p->size() == 1 && (*p)[0].is_string()) one = &(*p)[0];
  if (one->is_string()) {
    r.prompt_text = one->get<std::string>();
    if (r.prompt_text->empty()) throw BadRequest("'prompt' must not be empty", "prompt");
  } else if (p->is_array() && !p->empty() && (*p)[0].is_number_integer()) {
    for (const OJson& id : *p) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
        throw BadRequest("'prompt' token ids must be non-negative integers", "prompt");
      }
      r.prompt_ids.push_back(id.get<int32_t>());
    }
  } else {
    throw BadRequest("'prompt' must be a string or an array of token ids (one prompt per request)", "prompt");
  }
  return r;
}

}  // namespace dflash::serve
