// dflash trace: record an agent's session against a server once, replay it against any server
// (plain, DFlash, another engine), and compare two replays side by side.
#include <cstdio>
#include <cstring>
#include <string>

#include "args.h"
#include "commands.h"
#include "core/error.h"
#include "serve/trace.h"

namespace dflash::app {

namespace {

constexpr const char* kUsage =
    "usage: dflash trace record --upstream URL [--port 8081] --out DIR\n"
    "       dflash trace replay DIR --url URL [--out FILE.jsonl] [--api-key K]\n"
    "       dflash trace compare A.jsonl B.jsonl\n"
    "\n"
    "record   a proxy: point the agent at it; every request and its timed answer go to DIR\n"
    "replay   re-sends DIR's requests in order and writes one row per request\n"
    "compare  two replays side by side (B over A ratios)\n";

int Record(int argc, char** argv) {
  serve::RecorderOptions o;
  Args args("trace record", "Forward requests to --upstream and record each exchange (request body, timed SSE\n"
                            "stream or response) as DIR/NNNNNN.json.");
  args.Option("--upstream", &o.upstream, "URL", "the server to forward to, http://HOST:PORT");
  args.Option("--host", &o.host, "HOST", "address to listen on");
  args.Option("--port", &o.port, "N", "port to listen on");
  args.Option("--out", &o.out_dir, "DIR", "trace directory (created)");
  args.Option("--api-key", &o.api_key, "K", "require 'Authorization: Bearer K' or 'x-api-key: K' from clients (forwarded upstream as sent)");
  if (!args.Parse(argc, argv)) return 0;
  if (o.upstream.empty() || o.out_dir.empty()) Fail("dflash trace record: --upstream URL and --out DIR are required");
  serve::RunRecorder(o);
  return 0;
}

int Replay(int argc, char** argv) {
  serve::ReplayOptions o;
  std::string out;
  Args args("trace replay", "Re-send a recorded trace's requests one after another and measure each from the\n"
                            "client's side (TTFT, decode tok/s) beside the server's timings (tau, cache_n).");
  args.Positional("DIR", &o.dir, "trace directory written by `dflash trace record`");
  args.Option("--url", &o.url, "URL", "server to replay against, http://HOST:PORT");
  args.Option("--out", &out, "FILE", "where to write the rows as JSON lines (default DIR/replay.jsonl)");
  args.Option("--api-key", &o.api_key, "K", "bearer token for the server");
  args.Option("--timeout", &o.timeout_s, "S", "per-request read timeout in seconds");
  if (!args.Parse(argc, argv)) return 0;
  if (o.url.empty()) Fail("dflash trace replay: --url URL is required");
  if (out.empty()) out = o.dir + "/replay.jsonl";
  const auto rows = serve::Replay(o, [](const serve::ReplayRow& r) {
    std::fprintf(stderr, "request %d: %s, %.0f ms\n", r.index, r.error.empty() ? "ok" : r.error.c_str(), r.wall_ms);
  });
  serve::WriteRows(out, rows);
  std::fputs(serve::FormatRows(rows).c_str(), stdout);
  std::fprintf(stderr, "rows written to %s\n", out.c_str());
  return 0;
}

int Compare(int argc, char** argv) {
  std::string a, b;
  Args args("trace compare", "Join two replays by request and print B over A ratios.");
  args.Positional("A.jsonl", &a, "rows of the first replay");
  args.Positional("B.jsonl", &b, "rows of the second replay");
  if (!args.Parse(argc, argv)) return 0;
  std::fputs(serve::FormatComparison(serve::ReadRows(a), serve::ReadRows(b), a, b).c_str(), stdout);
  return 0;
}

}  // namespace

int Trace(int argc, char** argv) {
  if (argc < 1 || !std::strcmp(argv[0], "-h") || !std::strcmp(argv[0], "--help")) {
    std::fputs(kUsage, argc < 1 ? stderr : stdout);
    return argc < 1 ? 1 : 0;
  }
  const std::string sub = argv[0];
  if (sub == "record") return Record(argc - 1, argv + 1);
  if (sub == "replay") return Replay(argc - 1, argv + 1);
  if (sub == "compare") return Compare(argc - 1, argv + 1);
  Fail("dflash trace: unknown sub-command '", sub, "' (record, replay or compare)");
}

}  // namespace dflash::app
