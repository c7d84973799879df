// Agent traces: record what a client sends an OpenAI- or Anthropic-compatible server (and the
// timed answer; chat, completions, Messages and Responses requests alike),
// replay the same requests against any server later, and compare two replays side by side.
//
// A trace is a directory of one JSON file per request, NNNNNN.json, in arrival order:
//   {"index", "method", "path", "offset_ms" (since the first request), "request" (the body as
//    JSON, or "request_text" when it was not JSON), "status", "stream",
//    "events": [{"ms", "data"}] (each SSE data line and when it arrived, for streams),
//    "response" (the body, otherwise), "wall_ms"}
// Replays re-send the recorded bodies one after another (agents wait for each answer) and
// measure each from the client's side; the server's own `timings` (llama.cpp's fields plus
// tokens_per_cycle, acceptance, mode) are kept beside.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace dflash::serve {

struct RecorderOptions {
  std::string upstream;          // http://host:port of the real server
  std::string host = "127.0.0.1";
  int port = 8081;
  std::string out_dir;
  std::string api_key;           // clients must send it (Bearer or x-api-key): it is not added for them
};

// A proxy that forwards every request to `upstream` unchanged (streams pass through as they
// arrive) and writes each exchange into out_dir. Blocks until the process is stopped. It
// refuses what `dflash serve` refuses (access.h: Host, Origin, API key; slow or oversized
// requests), so that it opens no door the server closes.
void RunRecorder(const RecorderOptions& options);

struct ReplayRow {
  int index = 0;
  std::string path;
  int status = 0;
  std::string error;               // transport error or the server's error message
  double ttft_ms = -1;             // first token-carrying event (streams only)
  double wall_ms = 0;
  long prompt_tokens = -1, completion_tokens = -1, cache_n = -1;
  double decode_tok_s = -1;        // client side: (completion_tokens - 1) / (wall - ttft)
  double tokens_per_cycle = -1, acceptance = -1;
  std::string mode, finish_reason;
  nlohmann::ordered_json ToJson() const;
  static ReplayRow FromJson(const nlohmann::ordered_json& j);
};

struct ReplayOptions {
  std::string dir;
  std::string url;      // http://host:port
  std::string api_key;
  double timeout_s = 600;
};

// Re-sends every recorded request in order; `progress` sees each row as it completes.
std::vector<ReplayRow> Replay(const ReplayOptions& options, const std::function<void(const ReplayRow&)>& progress);

// Rows of one replay, as written by WriteRows.
void WriteRows(const std::string& path, const std::vector<ReplayRow>& rows);
std::vector<ReplayRow> ReadRows(const std::string& path);

// A fixed-width table of the rows, and one of two replays joined by request index with
// per-request ratios (b over a) and a summary line of totals.
std::string FormatRows(const std::vector<ReplayRow>& rows);
std::string FormatComparison(const std::vector<ReplayRow>& a, const std::vector<ReplayRow>& b,
                             const std::string& label_a, const std::string& label_b);

}  // namespace dflash::serve
