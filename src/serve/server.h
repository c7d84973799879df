// `dflash serve`: an OpenAI- and Anthropic-compatible HTTP server over one Engine. Routes:
//   POST /v1/chat/completions, POST /v1/completions, POST /v1/responses (OpenAI),
//   POST /v1/messages, POST /v1/messages/count_tokens (Anthropic), all plain and SSE streams,
//   GET /v1/models, GET /health, GET /metrics (Prometheus), POST /tokenize, /detokenize,
//   POST /apply-template (the rendered prompt of a chat request).
// Requests get a slot (SlotPool: prefix reuse, a queue with a timeout); slots take turns per
// step on the one model pair, so several requests progress at once. A client that goes away
// cancels its generation: streams notice at the next write, non-streamed requests through
// whitespace heartbeats (valid JSON padding) written while they run.
// Hostile clients: see GuardedHttpServer (slow requests, connection limit) and access.h (Host,
// Origin and API key checks, all made before a body is read; bodies bounded by --max-body).
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <cstdint>
#include <string>

#include "spec/engine.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace dflash::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                 // 0: any free port
  int parallel = 1;                // slots
  int saved_sequences = 0;         // prefix cache beyond the slots (--cache-ram), see SlotPool
  std::string cache_dir;           // the prefix cache's disk tier (--cache-dir; empty: none), see DiskCache
  uint64_t cache_disk_bytes = 0;   // its bound (--cache-disk)
  std::string api_key;             // empty: no authentication
  std::string alias = "dflash";    // the model name /v1/models lists and responses carry
  bool strict_model = false;       // reject requests naming another model
  std::string diagnostics_dir;     // empty: none
  double timeout_s = 600;          // per request: queueing and generation
  size_t max_body_bytes = 8u << 20;  // chunked and compressed bodies included
  int max_connections = 64;        // served at once; more are answered 503 (see GuardedHttpServer)
  double request_timeout_s = 30;   // a request's line, headers and body must arrive within this
  int heartbeat_ms = 2000;         // silence after which a keep-alive is written
  std::optional<uint64_t> seed;    // for requests without one (nullopt: random)
  // Test double: requests may carry "dflash_scripted_output": TEXT, which is then emitted as
  // the model's output (its tokens, through detokenisation, stop handling, the output parser
  // and SSE) instead of running the model. Off unless asked for.
  bool allow_scripted_output = false;
};

class Server {
 public:
  // `defaults`: generation options for requests that do not override them (from the flags).
  // `chat_template` nullopt: chat requests are refused with a clear error.
  Server(Engine& engine, const text::Tokenizer& tokenizer, std::optional<ChatTemplate> chat_template,
         const GenerateOptions& defaults, const ServerOptions& options);
  ~Server();

  int Bind();    // returns the port; throws Error when the address cannot be bound
  void Listen(); // serves until Stop(), then writes the cached sequences to the disk tier
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dflash::serve
