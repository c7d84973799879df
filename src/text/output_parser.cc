#include "text/output_parser.h"

#include "core/error.h"

namespace dflash {

namespace {

constexpr std::string_view kThinkOpen = "<think>", kThinkClose = "</think>";
constexpr std::string_view kToolOpen = "<tool_call>", kToolClose = "</tool_call>";

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Length of the longest suffix of `buf` that is a proper prefix of `tag`: text that may still
// become the tag once more arrives.
size_t PartialTagSuffix(std::string_view buf, std::string_view tag) {
  for (size_t k = std::min(buf.size(), tag.size() - 1); k > 0; --k) {
    if (buf.substr(buf.size() - k) == tag.substr(0, k)) return k;
  }
  return 0;
}

}  // namespace

OutputFormat DetectOutputFormat(const std::string& template_source, const std::string& prompt) {
  OutputFormat f;
  f.reasoning = template_source.find(kThinkOpen) != std::string::npos ||
                template_source.find(kThinkClose) != std::string::npos;
  if (template_source.find("<function=") != std::string::npos &&
      template_source.find("<parameter=") != std::string::npos) {
    f.tool_calls = ToolCallFormat::kXml;
  } else if (template_source.find(kToolOpen) != std::string::npos) {
    f.tool_calls = ToolCallFormat::kHermesJson;
  }
  size_t end = prompt.size();
  while (end > 0 && IsSpace(prompt[end - 1])) --end;
  f.starts_in_reasoning = f.reasoning && std::string_view(prompt).substr(0, end).ends_with(kThinkOpen);
  return f;
}

nlohmann::ordered_json ParsedOutput::ToMessage() const {
  nlohmann::ordered_json m;
  m["role"] = "assistant";
  m["content"] = content.empty() && !tool_calls.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(content);
  if (!reasoning_content.empty()) m["reasoning_content"] = reasoning_content;
  if (!tool_calls.empty()) {
    m["tool_calls"] = nlohmann::ordered_json::array();
    for (const ToolCall& c : tool_calls) {
      m["tool_calls"].push_back(
          {{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    }
  }
  return m;
}

ParsedOutput ParseOutput(std::string_view text, const OutputFormat& format) {
  OutputStreamParser parser(format);
  ParsedOutput out;
  auto add = [&out](OutputDelta d) {
    out.content += d.content;
    out.reasoning_content += d.reasoning_content;
    for (ToolCall& c : d.tool_calls) out.tool_calls.push_back(std::move(c));
  };
  add(parser.Push(text));
  add(parser.Finish());
  return out;
}

OutputStreamParser::OutputStreamParser(OutputFormat format) : format_(std::move(format)) {
  mode_ = !format_.reasoning ? Mode::kContent : format_.starts_in_reasoning ? Mode::kReasoning : Mode::kStart;
}

OutputDelta OutputStreamParser::Push(std::string_view text) {
  if (finished_) Fail("output parser: Push after Finish");
  buf_ += text;
  OutputDelta d;
  d.first_tool_index = tool_count_;
  Run(d, false);
  return d;
}

OutputDelta OutputStreamParser::Finish() {
  if (finished_) Fail("output parser: Finish called twice");
  finished_ = true;
  OutputDelta d;
  d.first_tool_index = tool_count_;
  Run(d, true);
  return d;
}

void OutputStreamParser::Run(OutputDelta& out, bool final) {
  while (true) {
    switch (mode_) {
      case Mode::kStart: {  // does the output open with <think>?
        size_t ws = 0;
        while (ws < buf_.size() && IsSpace(buf_[ws])) ++ws;
        const std::string_view rest = std::string_view(buf_).substr(ws);
        if (rest.starts_with(kThinkOpen)) {
          buf_.erase(0, ws + kThinkOpen.size());
          mode_ = Mode::kReasoning;
          continue;
        }
        if (kThinkOpen.starts_with(rest)) {  // still could be
          if (!final) return;
          buf_.clear();  // the stream ended inside "<think": drop the fragment
          return;
        }
        mode_ = Mode::kContent;
        continue;
      }
      case Mode::kReasoning: {
        const size_t close = buf_.find(kThinkClose);
        if (close != std::string::npos) {
          EmitReasoning(out, std::string_view(buf_).substr(0, close));
          held_newlines_.clear();
          buf_.erase(0, close + kThinkClose.size());
          mode_ = Mode::kContent;
          after_think_ = true;
          continue;
        }
        const size_t keep = PartialTagSuffix(buf_, kThinkClose);
        EmitReasoning(out, std::string_view(buf_).substr(0, buf_.size() - keep));
        buf_.erase(0, buf_.size() - keep);
        if (final) {  // reasoning cut off: no trailing newlines, no half "</think"
          held_newlines_.clear();
          buf_.clear();
        }
        return;
      }
      case Mode::kContent: {
        const bool tools = format_.tool_calls != ToolCallFormat::kNone;
        const size_t open = tools ? buf_.find(kToolOpen) : std::string::npos;
        if (open != std::string::npos) {
          EmitContent(out, std::string_view(buf_).substr(0, open));
          // Whitespace before a tool call is the template's; it survives only as the
          // separator between content before and after the call.
          if (!content_started_) held_space_.clear();
          buf_.erase(0, open + kToolOpen.size());
          mode_ = Mode::kToolCall;
          continue;
        }
        const size_t keep = tools ? PartialTagSuffix(buf_, kToolOpen) : 0;
        EmitContent(out, std::string_view(buf_).substr(0, buf_.size() - keep));
        buf_.erase(0, buf_.size() - keep);
        if (final) {
          buf_.clear();  // a half "<tool_call" at the very end is dropped
          if (tool_count_ == 0) out.content += held_space_;
          held_space_.clear();
        }
        return;
      }
      case Mode::kToolCall: {
        const size_t close = buf_.find(kToolClose);
        if (close != std::string::npos) {
          EmitToolBlock(out, std::string_view(buf_).substr(0, close), true);
          buf_.erase(0, close + kToolClose.size());
          mode_ = Mode::kContent;
          continue;
        }
        if (!final) return;  // the whole block is needed to parse it
        const std::string body = std::exchange(buf_, "");
        EmitToolBlock(out, body, false);
        mode_ = Mode::kContent;
        continue;
      }
    }
  }
}

void OutputStreamParser::EmitReasoning(OutputDelta& out, std::string_view text) {
  if (!reasoning_started_) {
    while (!text.empty() && text.front() == '\n') text.remove_prefix(1);
    if (text.empty()) return;
    reasoning_started_ = true;
  }
  size_t body = text.size();
  while (body > 0 && text[body - 1] == '\n') --body;
  if (body > 0) {
    out.reasoning_content += held_newlines_;
    out.reasoning_content += text.substr(0, body);
    held_newlines_.assign(text.substr(body));
  } else {
    held_newlines_ += text;
  }
}

void OutputStreamParser::EmitContent(OutputDelta& out, std::string_view text) {
  if (after_think_) {
    while (!text.empty() && text.front() == '\n') text.remove_prefix(1);
    if (text.empty()) return;
    after_think_ = false;
  }
  if (after_tool_) {
    while (!text.empty() && IsSpace(text.front())) text.remove_prefix(1);
    if (text.empty()) return;
    after_tool_ = false;
  }
  size_t body = text.size();
  while (body > 0 && IsSpace(text[body - 1])) --body;
  if (body > 0) {
    out.content += held_space_;
    out.content += text.substr(0, body);
    held_space_.assign(text.substr(body));
    content_started_ = true;
  } else {
    held_space_ += text;
  }
}

void OutputStreamParser::EmitToolBlock(OutputDelta& out, std::string_view body, bool closed) {
  // A block cut off by the end of generation counts only if the call itself is complete.
  const bool complete = closed || format_.tool_calls != ToolCallFormat::kXml ||
                        body.find("</function>") != std::string_view::npos;
  auto calls = complete ? ParseToolCallBody(body, format_.tool_calls, format_.tools) : std::nullopt;
  if (!calls) {
    // Not a call we can read: show the text the model wrote rather than lose it.
    std::string raw = std::string(kToolOpen) + std::string(body) + (closed ? std::string(kToolClose) : "");
    EmitContent(out, raw);
    return;
  }
  for (ToolCall& c : *calls) {
    c.id = format_.call_id_prefix + std::to_string(tool_count_++);
    out.tool_calls.push_back(std::move(c));
  }
  after_tool_ = true;
}

}  // namespace dflash
