// dflash serve: the OpenAI- and Anthropic-compatible server (src/serve/server.h) over one model pair.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <pthread.h>
#include <thread>

#include "commands.h"
#include "core/error.h"
#include "model_flags.h"
#include "open_tokenizer.h"
#include "serve/server.h"

namespace dflash::app {

namespace {

double MiB(size_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

}  // namespace

int Serve(int argc, char** argv) {
  ModelFlags mf;
  serve::ServerOptions so;
  std::string tokenizer_dir, template_file;
  double max_body_mib = 8, cache_ram_mib = 0, cache_disk_mib = 4096;
  bool scripted = false;
  Args args("serve", "Serve the model over HTTP: OpenAI chat, completions and Responses, Anthropic Messages,\n"
                     "models, metrics.\n"
                     "Each slot keeps its last sequence, so a request that repeats a conversation's prefix\n"
                     "reuses its KV cache and draft context; slots take turns per step on the model.");
  mf.Declare(args);
  args.Option("--host", &so.host, "ADDR", "address to listen on");
  args.Option("--port", &so.port, "N", "port to listen on (0: any free port, printed at start)");
  args.Option("--parallel", &so.parallel, "N", "sequence slots: requests served at once (each reserves --ctx of KV)");
  args.Option("--api-key", &so.api_key, "KEY", "require 'Authorization: Bearer KEY' or 'x-api-key: KEY' (all routes but /health)");
  args.Option("--alias", &so.alias, "NAME", "model name listed by /v1/models and returned in responses");
  args.Flag("--strict-model", &so.strict_model, "reject requests whose 'model' is not the alias (default: serve any name)");
  args.Option("--diagnostics", &so.diagnostics_dir, "DIR", "write DIR/requests.jsonl (one line per request) and DIR/summary.json");
  args.Option("--cache-ram", &cache_ram_mib, "MIB",
              "RAM for saved sequences beyond the slots (prefix cache, LRU; whole sequences of --ctx each)");
  args.Option("--cache-dir", &so.cache_dir, "DIR",
              "prefix cache on disk: sequences saved when the RAM cache drops them and at shutdown, "
              "reused after a restart and by other servers of the same model and settings on DIR");
  args.Option("--cache-disk", &cache_disk_mib, "MIB", "bound on --cache-dir's size (least recently used files go first)");
  args.Option("--timeout", &so.timeout_s, "SEC", "per-request limit on queueing plus generation (then finish_reason 'length')");
  args.Option("--max-body", &max_body_mib, "MIB", "largest request body accepted (chunked and compressed ones too)");
  args.Option("--max-connections", &so.max_connections, "N", "connections served at once; more are answered 503");
  args.Option("--request-timeout", &so.request_timeout_s, "SEC",
              "a request's line, headers and body must arrive within this (slow clients are cut off)");
  args.Option("--tokenizer", &tokenizer_dir, "DIR", "tokenizer directory (default: the model directory)");
  args.Option("--chat-template", &template_file, "FILE", "chat template file instead of the model's own");
  args.Flag("--test-scripted-output", &scripted,
            "testing only: honour a request's 'dflash_scripted_output' text as the model's output");
  if (!args.Parse(argc, argv)) return 0;
  if (so.parallel < 1) Fail("--parallel must be at least 1, got ", so.parallel);
  if (so.timeout_s <= 0) Fail("--timeout must be positive, got ", so.timeout_s);
  if (max_body_mib <= 0) Fail("--max-body must be positive, got ", max_body_mib);
  if (cache_ram_mib < 0) Fail("--cache-ram must be >= 0, got ", cache_ram_mib);
  if (cache_disk_mib <= 0) Fail("--cache-disk must be positive, got ", cache_disk_mib);
  so.cache_disk_bytes = static_cast<uint64_t>(cache_disk_mib * 1024 * 1024);
  so.max_body_bytes = static_cast<size_t>(max_body_mib * 1024 * 1024);
  so.allow_scripted_output = scripted;
  if (args.Given("--seed")) so.seed = mf.seed;

  const EngineOptions engine_options = mf.Engine();  // flags and paths checked before any loading
  ModelText model_text(tokenizer_dir, mf.model);
  const text::Tokenizer& tok = model_text.RequireTokenizer("serve");
  std::optional<ChatTemplate> chat_template;
  if (!template_file.empty()) {
    chat_template = ChatTemplate::FromFile(template_file, model_text.source());
  } else {
    try {
      chat_template = OpenChatTemplate(model_text.source(), tok);
    } catch (const Error& e) {
      std::fprintf(stderr, "warning: %s; /v1/chat/completions is unavailable\n", e.what());
    }
  }

  // SIGINT / SIGTERM stop the server from a thread of their own, not from a signal handler;
  // blocked before any thread starts (the engine's pool too), so that only that thread sees them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  Engine engine(engine_options);
  WarnIfContextUntrained(engine);
  GenerateOptions gen = mf.Generation(args, engine);
  // Without -n a request may fill its context, as OpenAI's servers allow.
  if (!args.Given("--n-predict")) gen.max_new_tokens = engine.options().context;

  // A bounded draft context drops rows it cannot rebuild: such sequences are never reused.
  if (!so.cache_dir.empty() && engine.has_draft() && engine.options().draft_window > 0) {
    Fail("--cache-dir needs an unbounded draft context: --draft-window ", engine.options().draft_window,
         " sequences cannot be reused");
  }
  const size_t per_slot = engine.cache_bytes();
  so.saved_sequences = static_cast<int>(cache_ram_mib * 1024 * 1024 / static_cast<double>(per_slot));
  if (cache_ram_mib > 0 && so.saved_sequences == 0) {
    Fail("--cache-ram ", cache_ram_mib, " MiB holds no sequence: one takes ", MiB(per_slot), " MiB at --ctx ",
         engine.options().context);
  }
  serve::Server server(engine, tok, std::move(chat_template), gen, so);
  const int port = server.Bind();
  const bool hybrid = std::count(engine.target_config().decoder.layer_linear.begin(),
                                 engine.target_config().decoder.layer_linear.end(), true) > 0;
  std::fprintf(stderr,
               "dflash serve: %s%s%s, %s, %d slot(s) x %d positions\n"
               "  reserved: %.1f MiB per sequence (%zu bytes: KV%s%s); %d slot(s) + %d saved sequence(s) = %.1f MiB\n"
               "  (every slot keeps its last sequence for prefix reuse; saved ones extend that cache, LRU)\n",
               mf.model.c_str(), engine.has_draft() ? " + draft " : "", engine.has_draft() ? mf.draft.c_str() : "",
               gen.block_size > 1 ? "dflash" : "plain decoding", so.parallel, engine.options().context, MiB(per_slot),
               per_slot, hybrid ? " + recurrent state, its rollback copy and row log, checkpoints" : "",
               engine.has_draft() ? " + draft context" : "", so.parallel, so.saved_sequences,
               MiB(per_slot * (so.parallel + so.saved_sequences)));
  if (!so.cache_dir.empty()) {
    std::fprintf(stderr, "dflash serve: disk cache %s, at most %.0f MiB\n", so.cache_dir.c_str(), cache_disk_mib);
  }
  std::fprintf(stderr, "dflash serve: listening on http://%s:%d\n", so.host.c_str(), port);
  std::fflush(stderr);

  std::atomic<bool> listen_returned{false};
  std::thread stopper([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    // A signal that arrives before Listen has started would be lost to a single Stop (the HTTP
    // server ignores a stop while it is not running, then listens forever): repeat until it returns.
    while (!listen_returned) {
      server.Stop();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });
  server.Listen();
  listen_returned = true;
  // Listen returned on its own (not by a signal): wake the stopper so it can be joined.
  pthread_kill(stopper.native_handle(), SIGTERM);
  stopper.join();
  return 0;
}

}  // namespace dflash::app
