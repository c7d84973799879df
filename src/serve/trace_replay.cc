// Replaying a recorded trace: the same bodies, in order, each timed from the client's side.
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "serve/trace.h"

namespace dflash::serve {

namespace {

using OJson = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

std::vector<fs::path> TraceFiles(const std::string& dir) {
  if (!fs::is_directory(dir)) Fail("trace replay: ", dir, ": not a directory");
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.size() == 11 && name.ends_with(".json") && std::all_of(name.begin(), name.begin() + 6, ::isdigit)) {
      files.push_back(e.path());
    }
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) Fail("trace replay: ", dir, ": no recorded requests (NNNNNN.json)");
  return files;
}

OJson ReadJson(const fs::path& path) {
  std::ifstream in(path);
  if (!in) Fail(path.string(), ": cannot open");
  try {
    return OJson::parse(in);
  } catch (const nlohmann::json::exception& e) {
    Fail(path.string(), ": malformed JSON: ", e.what());
  }
}

// True when a streamed chunk carries generated text or a tool call (what TTFT waits for): an
// OpenAI chunk with content, an Anthropic content_block_delta, a Responses *.delta event.
bool CarriesTokens(const OJson& chunk) {
  if (chunk.is_object() && chunk.contains("type") && chunk["type"].is_string()) {
    const std::string type = chunk["type"];
    return type == "content_block_delta" || (type.rfind("response.", 0) == 0 && type.ends_with(".delta"));
  }
  if (!chunk.contains("choices") || !chunk["choices"].is_array()) return false;
  for (const OJson& c : chunk["choices"]) {
    if (c.contains("text") && c["text"].is_string() && !c["text"].get<std::string>().empty()) return true;
    if (!c.contains("delta") || !c["delta"].is_object()) continue;
    const OJson& d = c["delta"];
    for (const char* k : {"content", "reasoning_content"}) {
      if (d.contains(k) && d[k].is_string() && !d[k].get<std::string>().empty()) return true;
    }
    if (d.contains("tool_calls")) return true;
  }
  return false;
}

// usage, timings and finish_reason, wherever in a response or chunk they appear, in any of the
// server's APIs: OpenAI chat/completions, Anthropic Messages (stop_reason; usage's input_tokens
// leave out cache reads), Responses (events carry the response object; its status).
void TakeStats(const OJson& j, ReplayRow& row) {
  if (!j.is_object()) return;
  if (j.contains("response") && j["response"].is_object()) TakeStats(j["response"], row);
  if (j.contains("error") && !j["error"].is_null()) {  // a Responses object has "error": null
    const OJson& e = j["error"];
    row.error = e.is_object() && e.contains("message") && e["message"].is_string() ? e["message"].get<std::string>() : e.dump();
  } else if (j.value("type", "") == "error" && j.contains("message") && j["message"].is_string()) {
    row.error = j["message"];  // a Responses stream's error event
  }
  if (j.contains("usage") && j["usage"].is_object()) {
    const OJson& u = j["usage"];
    row.prompt_tokens = u.value("prompt_tokens", row.prompt_tokens);
    row.completion_tokens = u.value("completion_tokens", row.completion_tokens);
    if (u.contains("input_tokens")) row.prompt_tokens = u.value("input_tokens", 0L) + u.value("cache_read_input_tokens", 0L);
    row.completion_tokens = u.value("output_tokens", row.completion_tokens);
  }
  for (const OJson* m : {&j, j.contains("delta") && j["delta"].is_object() ? &j["delta"] : nullptr}) {
    if (m && m->contains("stop_reason") && (*m)["stop_reason"].is_string()) row.finish_reason = (*m)["stop_reason"];
  }
  if (j.value("object", "") == "response" && j.contains("status") && j["status"].is_string()) row.finish_reason = j["status"];
  if (j.contains("timings") && j["timings"].is_object()) {
    const OJson& t = j["timings"];
    row.cache_n = t.value("cache_n", row.cache_n);
    // A plain-mode answer has no cycles; its 0 is "not applicable", not a measured tau.
    if (t.value("cycles", 1L) > 0) {
      row.tokens_per_cycle = t.value("tokens_per_cycle", row.tokens_per_cycle);
      row.acceptance = t.value("acceptance", row.acceptance);
    }
    row.mode = t.value("mode", row.mode);
    if (row.completion_tokens < 0) row.completion_tokens = t.value("predicted_n", -1L);
  }
  if (j.contains("choices") && j["choices"].is_array()) {
    for (const OJson& c : j["choices"]) {
      if (c.contains("finish_reason") && c["finish_reason"].is_string()) row.finish_reason = c["finish_reason"];
    }
  }
}

double Ms(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }

ReplayRow ReplayOne(const OJson& rec, const ReplayOptions& options) {
  ReplayRow row;
  row.index = rec.value("index", 0);
  row.path = rec.value("path", std::string("/v1/chat/completions"));
  const std::string method = rec.value("method", std::string("POST"));
  std::string body;
  bool stream = false;
  if (rec.contains("request")) {
    OJson request = rec["request"];
    stream = request.is_object() && request.value("stream", false) == true;
    // Token counts come from usage, which an OpenAI chat or completions stream carries only
    // when asked for (Anthropic and Responses streams always do).
    if (stream && row.path.ends_with("completions")) request["stream_options"]["include_usage"] = true;
    body = request.dump();
  } else {
    body = rec.value("request_text", std::string());
  }

  httplib::Client client(options.url);
  client.set_read_timeout(static_cast<time_t>(options.timeout_s), 0);
  httplib::Request req;
  req.method = method;
  req.path = row.path;
  req.body = body;
  req.set_header("Content-Type", "application/json");
  if (!options.api_key.empty()) req.set_header("Authorization", "Bearer " + options.api_key);

  const Clock::time_point t0 = Clock::now();
  std::string pending, whole;
  long streamed_chunks = 0;
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    whole.append(data, n);
    if (!stream) return true;
    pending.append(data, n);
    for (size_t nl; (nl = pending.find('\n')) != std::string::npos; pending.erase(0, nl + 1)) {
      std::string line = pending.substr(0, nl);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.rfind("data:", 0) != 0) continue;
      line.erase(0, line.size() > 5 && line[5] == ' ' ? 6 : 5);
      if (line == "[DONE]") continue;
      const OJson chunk = OJson::parse(line, nullptr, /*allow_exceptions=*/false);
      if (chunk.is_discarded()) continue;
      if (CarriesTokens(chunk)) {
        if (row.ttft_ms < 0) row.ttft_ms = Ms(t0, Clock::now());
        ++streamed_chunks;
      }
      TakeStats(chunk, row);
    }
    return true;
  };
  const httplib::Result result = client.send(req);
  row.wall_ms = Ms(t0, Clock::now());
  if (!result) {
    row.error = "cannot reach " + options.url + ": " + httplib::to_string(result.error());
    return row;
  }
  row.status = result->status;
  if (!stream) TakeStats(OJson::parse(whole, nullptr, false), row);
  if (row.completion_tokens < 0 && stream) row.completion_tokens = streamed_chunks;
  if (row.status != 200 && row.error.empty()) row.error = "HTTP " + std::to_string(row.status);
  if (row.ttft_ms >= 0 && row.completion_tokens > 1 && row.wall_ms > row.ttft_ms) {
    row.decode_tok_s = (row.completion_tokens - 1) * 1000.0 / (row.wall_ms - row.ttft_ms);
  }
  return row;
}

}  // namespace

std::vector<ReplayRow> Replay(const ReplayOptions& options, const std::function<void(const ReplayRow&)>& progress) {
  if (options.url.rfind("http://", 0) != 0) Fail("trace replay: --url must be http://HOST:PORT, got '", options.url, "'");
  std::vector<ReplayRow> rows;
  for (const fs::path& file : TraceFiles(options.dir)) {
    const OJson rec = ReadJson(file);
    if (!rec.is_object()) Fail(file.string(), ": expected a recorded request object");
    rows.push_back(ReplayOne(rec, options));
    if (progress) progress(rows.back());
  }
  return rows;
}

}  // namespace dflash::serve
