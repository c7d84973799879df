#include "serve/server.h"

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <random>

#include "core/dtype.h"
#include "core/peak_rss.h"
#include "serve/access.h"
#include "serve/anthropic_format.h"
#include "serve/api_error.h"
#include "serve/diagnostics.h"
#include "serve/disk_cache.h"
#include "serve/guarded_http.h"
#include "serve/json_text.h"
#include "serve/metrics.h"
#include "serve/openai_format.h"
#include "serve/reply_stream.h"
#include "serve/request.h"
#include "serve/responses_format.h"
#include "serve/slot_pool.h"
#include "spec/policy.h"
#include "text/chat_prompt.h"

namespace dflash::serve {

namespace {

using Clock = std::chrono::steady_clock;

double MsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

void SendJson(httplib::Response& res, int status, const OJson& body) {
  res.status = status;
  res.set_content(DumpJson(body), "application/json");
}

// Where a generation's output goes: a stream writes each delta, a plain response collects
// them. Alive() is called while nothing is shown (queueing: done < 0; prefill: done of total;
// decoding with text held back: total 0) so that a writer can send keep-alives; false from
// either means the client is gone.
class Emitter {
 public:
  virtual ~Emitter() = default;
  virtual bool Delta(const OutputDelta& d) = 0;
  virtual bool Alive(int prefill_done, int prefill_total) = 0;
};

// A parsed request, ready to run.
struct Job {
  uint64_t number = 0;  // unique within this server's run
  ResponseHeader header;
  const char* endpoint = "";              // as metrics and diagnostics name it
  std::unique_ptr<ReplyFormat> reply;     // the API's reply shapes
  GenerationRequest request;
  std::vector<int32_t> prompt;
  GenerateOptions gen;
  std::optional<OutputFormat> format;  // chat only
  std::string forced_prefix;           // tool_choice required / named
  Clock::time_point start, deadline;
};

struct Outcome {
  GenerateResult result;
  // The loop's, or the server's own end (a stop string, the deadline, a client gone); kToolCalls
  // for a reply that stopped after tool calls.
  FinishReason finish_reason = FinishReason::kStop;
  bool timed_out = false;
  ParsedOutput parsed;        // chat: the whole message
  std::string text;           // completions: the whole text
  std::string stop_sequence;  // the request's stop sequence that ended it, if one did
  std::string mode;
  int slot = -1;
  bool from_disk = false;  // the reused prefix was loaded from the disk tier
  double disk_ms = 0;
  double wall_ms = 0;
  FinishedReply Finished() const { return {parsed, finish_reason, stop_sequence, result.stats, mode}; }
};

// The opening a forced tool call starts with, in the template's own syntax.
std::string ForcedToolPrefix(const ChatRequest& r, const OutputFormat& f) {
  if (r.tool_choice != ToolChoice::kRequired && r.tool_choice != ToolChoice::kNamed) return "";
  std::string p = f.starts_in_reasoning ? "</think>\n\n" : "";
  p += "<tool_call>\n";
  if (r.tool_choice == ToolChoice::kNamed) {
    p += f.tool_calls == ToolCallFormat::kXml ? "<function=" + r.tool_name + ">\n"
                                              : "{\"name\": " + OJson(r.tool_name).dump() + ", \"arguments\": ";
  }
  return p;
}

}  // namespace

struct Server::Impl {
  Impl(Engine& e, const text::Tokenizer& t, std::optional<ChatTemplate> tmpl, const GenerateOptions& d,
       const ServerOptions& o)
      : engine(e), tok(t), chat_template(std::move(tmpl)), defaults(d), opt(o), access{o.host, o.api_key},
        disk(o.cache_dir.empty() ? nullptr
                                 : std::make_unique<DiskCache>(e, o.cache_dir, o.cache_disk_bytes, DiskCacheIdentity(e))),
        slots(e, o.parallel, o.saved_sequences, disk.get()), http(ConnectionLimits{o.max_connections, o.request_timeout_s}) {
    if (!opt.diagnostics_dir.empty()) {
      diagnostics.emplace(opt.diagnostics_dir, RunConfig());
      std::fprintf(stderr, "dflash serve: diagnostics in %s\n", diagnostics->dir().c_str());
    }
  }

  Engine& engine;
  const text::Tokenizer& tok;
  std::optional<ChatTemplate> chat_template;
  GenerateOptions defaults;
  ServerOptions opt;
  AccessPolicy access;
  std::unique_ptr<DiskCache> disk;  // before slots, which use it
  SlotPool slots;
  Metrics metrics;
  std::optional<Diagnostics> diagnostics;
  GuardedHttpServer http;
  std::atomic<uint64_t> next_id{1};
  std::random_device entropy;
  std::mutex entropy_mu;

  using Handler = std::function<void(const httplib::Request&, const std::string& body, httplib::Response&)>;
  using ErrorBody = OJson (*)(const ApiError&);  // the route's API's error format
  static OJson OpenAIErrorBody(const ApiError& e) { return e.Body(); }
  void Handle(const std::string& endpoint, bool auth, ErrorBody error_body, const httplib::Request& req,
              httplib::Response& res, const httplib::ContentReader* body, const Handler& h);
  void Get(const std::string& path, const std::string& endpoint, bool auth, Handler h);
  void Post(const std::string& path, const std::string& endpoint, Handler h, ErrorBody error_body = OpenAIErrorBody);
  std::string ResponseModel(const std::string& requested) const;
  OJson RunConfig() const;
  void Setup();

  Job NewJob(const GenerationRequest& r, const char* object, const char* id_prefix);
  Job ChatJob(const ChatRequest& r, const char* object, const char* id_prefix);
  Job CompletionJob(const std::string& body);
  void Serve(Job job, httplib::Response& res);
  Outcome Run(Job& job, Slot* slot, Emitter& out);
  GenerateResult RunScript(const Job& job, const GenerateHooks& hooks);
  void Record(const Job& job, const Outcome& o);
};

// The checks come before the body is read: a refused request costs no memory (or time) for a
// body it may never finish sending.
void Server::Impl::Handle(const std::string& endpoint, bool auth, ErrorBody error_body, const httplib::Request& req,
                          httplib::Response& res, const httplib::ContentReader* body, const Handler& h) {
  try {
    CheckHostAndOrigin(access, req);
    if (auth) CheckApiKey(access, req);
    h(req, body ? ReadBody(req, *body, opt.max_body_bytes) : std::string(), res);
  } catch (const ApiError& e) {
    SendJson(res, e.status(), error_body(e));
  } catch (const Error& e) {
    // dflash::Error from request content: a template that refuses the conversation,
    // text that is not UTF-8, a token id outside the vocabulary.
    SendJson(res, 400, error_body(BadRequest(e.what())));
  } catch (const std::exception& e) {
    SendJson(res, 500, error_body(ApiError(500, "server_error", e.what())));
  }
  // A reply streamed by a content provider leaves the status unset; httplib then sends 200.
  metrics.CountRequest(endpoint, res.status == -1 ? 200 : res.status);
}

void Server::Impl::Get(const std::string& path, const std::string& endpoint, bool auth, Handler h) {
  http.Get(path, [this, endpoint, auth, h](const httplib::Request& req, httplib::Response& res) {
    Handle(endpoint, auth, OpenAIErrorBody, req, res, nullptr, h);
  });
}

void Server::Impl::Post(const std::string& path, const std::string& endpoint, Handler h, ErrorBody error_body) {
  http.Post(path, [this, endpoint, h, error_body](const httplib::Request& req, httplib::Response& res,
                                                  const httplib::ContentReader& body) {
    Handle(endpoint, true, error_body, req, res, &body, h);
  });
}

std::string Server::Impl::ResponseModel(const std::string& requested) const {
  if (opt.strict_model) {
    if (requested.empty()) throw BadRequest("'model' is required", "model");
    if (requested != opt.alias) {
      throw ApiError(404, "invalid_request_error", "the model '" + requested + "' does not exist (this server serves '" + opt.alias + "')",
                     "model", "model_not_found");
    }
  }
  return requested.empty() ? opt.alias : requested;
}

// What a run's numbers depend on, for diagnostics/summary.json.
OJson Server::Impl::RunConfig() const {
  const EngineOptions& e = engine.options();
  const auto quant = [](const std::optional<DType>& q) { return q ? OJson(std::string(DTypeName(*q))) : OJson("as stored"); };
  return {{"target", e.target_dir},
          {"draft", e.draft_dir},
          {"block_size", defaults.block_size},
          {"spec_policy", std::string(SpecPolicyName(defaults.policy))},
          {"draft_window", e.draft_window},
          {"draft_sink", e.draft_sink},
          {"target_quant", quant(e.target_quant)},
          {"draft_quant", quant(e.draft_quant)},
          {"kv_type", std::string(DTypeName(e.kv_type))},
          {"bf16_activations", e.bf16_activations},
          {"context", e.context},
          {"prefill_chunk", e.prefill_chunk},
          {"threads", e.threads},
          {"slots", opt.parallel},
          {"saved_sequences", opt.saved_sequences}};
}

Job Server::Impl::NewJob(const GenerationRequest& r, const char* object, const char* id_prefix) {
  if (r.scripted_output && !opt.allow_scripted_output) {
    throw BadRequest("'dflash_scripted_output' needs a server started with --test-scripted-output", "dflash_scripted_output");
  }
  Job job;
  job.start = Clock::now();
  job.deadline = job.start + std::chrono::milliseconds(static_cast<int64_t>(opt.timeout_s * 1000));
  job.request = r;
  const uint64_t n = next_id++;
  job.number = n;
  job.header.id = std::string(id_prefix) + std::to_string(n) + "-" +
                  std::to_string(std::chrono::system_clock::now().time_since_epoch().count() % 1000000007);
  job.header.object = object;
  job.header.created = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  job.header.model = ResponseModel(r.model);
  GenerateOptions& g = job.gen;
  g = defaults;
  if (r.max_tokens) g.max_new_tokens = *r.max_tokens;
  if (r.ignore_eos) g.ignore_stop = true;
  if (r.temperature) g.sampling.temperature = *r.temperature;
  if (r.top_p) g.sampling.top_p = *r.top_p;
  if (r.top_k) g.sampling.top_k = *r.top_k;
  if (r.min_p) g.sampling.min_p = *r.min_p;
  if (r.presence_penalty) g.sampling.presence_penalty = *r.presence_penalty;
  if (r.frequency_penalty) g.sampling.frequency_penalty = *r.frequency_penalty;
  if (r.repetition_penalty) g.sampling.repetition_penalty = *r.repetition_penalty;
  if (r.spec_sampling) g.sampling.spec = *r.spec_sampling;
  if (r.seed) {
    g.sampling.seed = *r.seed;
  } else if (opt.seed) {
    g.sampling.seed = *opt.seed;
  } else {
    std::lock_guard<std::mutex> l(entropy_mu);
    g.sampling.seed = (static_cast<uint64_t>(entropy()) << 32) ^ entropy();
  }
  try {
    ValidateSampling(g.sampling);
  } catch (const Error& e) {
    throw BadRequest(e.what());
  }
  return job;
}

Job Server::Impl::ChatJob(const ChatRequest& r, const char* object, const char* id_prefix) {
  Job job = NewJob(r, object, id_prefix);
  if (!chat_template) {
    throw BadRequest("this model has no chat template: use /v1/completions, or start the server with --chat-template FILE");
  }
  const bool use_tools = !r.tools.is_null() && r.tool_choice != ToolChoice::kNone;
  ChatPrompt p = BuildChatPrompt(*chat_template, tok, r.messages, use_tools ? r.tools : OJson(), r.chat_template_kwargs);
  if (use_tools && p.output.tool_calls == ToolCallFormat::kNone) {
    throw BadRequest("this model's chat template has no tool-call format, so 'tools' cannot be used", "tools");
  }
  if (!use_tools) p.output.tool_calls = ToolCallFormat::kNone;  // tool_choice none: all text is content
  p.output.call_id_prefix = "call_" + std::to_string(job.number) + "_";
  job.forced_prefix = ForcedToolPrefix(r, p.output);
  job.prompt = std::move(p.ids);
  if (!job.forced_prefix.empty()) {
    const std::vector<int32_t> forced = tok.Encode(job.forced_prefix);
    job.prompt.insert(job.prompt.end(), forced.begin(), forced.end());
  }
  job.format = std::move(p.output);
  return job;
}

Job Server::Impl::CompletionJob(const std::string& body) {
  const CompletionRequest r = ParseCompletionRequest(ParseBody(body));
  Job job = NewJob(r, "text_completion", "cmpl-");
  if (r.prompt_text) {
    if (tok.add_bos() && tok.bos_id() >= 0) job.prompt.push_back(tok.bos_id());
    const std::vector<int32_t> ids = tok.Encode(*r.prompt_text);
    job.prompt.insert(job.prompt.end(), ids.begin(), ids.end());
  } else {
    const int vocab = engine.target_config().decoder.vocab_size;
    for (int32_t id : r.prompt_ids) {
      if (id >= vocab) throw BadRequest("token id " + std::to_string(id) + " is outside the vocabulary (" + std::to_string(vocab) + ")", "prompt");
    }
    job.prompt = r.prompt_ids;
  }
  return job;
}

GenerateResult Server::Impl::RunScript(const Job& job, const GenerateHooks& hooks) {
  // Commits the script's tokens a few at a time, as DFlash cycles do, through the decoding
  // loop's own commit step, so it ends as the loop would: at a stop token, at max_tokens, or
  // when the sink says stop; a script that runs out ends as at a stop token. Nothing is
  // prefilled, so ttft stays 0.
  GenerateResult r;
  r.stats.prompt_tokens = static_cast<int>(job.prompt.size());
  const std::vector<int32_t> ids = tok.Encode(*job.request.scripted_output);
  const auto start = Clock::now();
  std::optional<FinishReason> end;
  for (size_t i = 0; i < ids.size() && !end; i += 3) {
    end = CommitTokens(std::span(ids).subspan(i, std::min<size_t>(3, ids.size() - i)), job.gen, hooks.sink, r.tokens);
  }
  r.finish_reason = end.value_or(FinishReason::kStop);
  r.stats.completion_tokens = static_cast<int>(r.tokens.size());
  r.stats.decode_ms = MsBetween(start, Clock::now());
  return r;
}

Outcome Server::Impl::Run(Job& job, Slot* slot, Emitter& out) {
  Outcome o;
  o.slot = slot ? slot->id : -1;
  if (slot) {
    o.from_disk = slot->from_disk;
    o.disk_ms = slot->disk_ms;
  }
  ReplyStream reply(tok, job.gen.ignore_stop ? std::vector<int32_t>() : job.gen.stop_tokens, job.request.stop,
                    job.format, job.forced_prefix);
  std::optional<FinishReason> ended;  // why the server, not the decoding loop, ended it
  const auto add = [&](const OutputDelta& d) {
    o.parsed.content += d.content;
    o.parsed.reasoning_content += d.reasoning_content;
    for (const ToolCall& c : d.tool_calls) o.parsed.tool_calls.push_back(c);
  };
  const auto over_time = [&] {
    if (Clock::now() < job.deadline) return false;
    o.timed_out = true;
    ended = FinishReason::kLength;
    return true;
  };
  GenerateHooks hooks;
  hooks.sink = [&](std::span<const int32_t> ids) {
    const OutputDelta d = reply.Push(ids);
    add(d);
    if (!(d.empty() ? out.Alive(0, 0) : out.Delta(d))) {
      ended = FinishReason::kCancelled;
      return false;
    }
    if (reply.stopped()) {
      ended = FinishReason::kStop;
      return false;
    }
    return !over_time();
  };
  hooks.progress = [&](int done, int total) {
    if (!out.Alive(done, total)) {
      ended = FinishReason::kCancelled;
      return false;
    }
    return !over_time();
  };
  if (job.request.scripted_output) {
    o.result = RunScript(job, hooks);
    o.mode = "scripted";
  } else {
    o.result = engine.Continue(slot->seq, job.prompt, job.gen, hooks);
    o.mode = job.gen.block_size > 1 ? "dflash" : "ar";
  }
  o.finish_reason = ended.value_or(o.result.finish_reason);
  if (o.finish_reason != FinishReason::kCancelled) {
    const OutputDelta tail = reply.Finish();
    add(tail);
    if (!tail.empty() && !out.Delta(tail)) o.finish_reason = FinishReason::kCancelled;
  }
  if (o.finish_reason == FinishReason::kStop && !o.parsed.tool_calls.empty()) o.finish_reason = FinishReason::kToolCalls;
  o.text = reply.text();
  o.stop_sequence = reply.stop_sequence();
  o.wall_ms = MsBetween(job.start, Clock::now());
  return o;
}

void Server::Impl::Record(const Job& job, const Outcome& o) {
  GenerationRecord rec;
  rec.stats = o.result.stats;
  rec.finish_reason = o.finish_reason;
  rec.timed_out = o.timed_out;
  rec.wall_s = o.wall_ms / 1000.0;
  rec.cache_tier = o.result.stats.cached_tokens == 0 ? "" : o.from_disk ? "disk" : "ram";
  metrics.Record(rec);
  if (!diagnostics) return;
  OJson d;
  d["id"] = job.header.id;
  d["endpoint"] = job.endpoint;
  d["model"] = job.header.model;
  d["stream"] = job.request.stream;
  d["slot"] = o.slot;
  d["finish_reason"] = FinishReasonName(o.finish_reason);
  d["timed_out"] = o.timed_out;
  d["cache_hit"] = o.result.stats.cached_tokens > 0;
  d["cache_tier"] = rec.cache_tier.empty() ? OJson() : OJson(rec.cache_tier);
  if (disk) d["cache_disk_ms"] = o.disk_ms;
  d["ttft_ms"] = o.result.stats.ttft_ms;
  d["wall_ms"] = o.wall_ms;
  d["usage"] = UsageJson(o.result.stats);
  d["timings"] = TimingsJson(o.result.stats, o.mode);
  const GenerateStats& s = o.result.stats;
  d["spec"] = {{"cycles", s.cycles},
               {"verified_rows", s.verified_rows},
               {"verified_rows_per_cycle", s.cycles > 0 ? static_cast<double>(s.verified_rows) / s.cycles : 0.0},
               {"plain_steps", s.plain_steps},
               {"fallbacks", s.fallbacks},
               {"probes", s.probes},
               {"draft_ms", s.draft_ms},
               {"verify_ms", s.verify_ms},
               {"steps", s.steps},
               {"step_experts", s.step_experts},
               {"verify_experts", s.verify_experts}};
  d["peak_rss_mib"] = PeakRssMiB();
  diagnostics->Write(d);
}

namespace {

// Collects a non-streamed reply; writes whitespace heartbeats (leading whitespace is valid JSON)
// during long requests, which is also how it notices a client that went away.
class CollectingEmitter final : public Emitter {
 public:
  CollectingEmitter(httplib::DataSink& sink, int heartbeat_ms) : sink_(sink), heartbeat_ms_(heartbeat_ms) {}
  bool Delta(const OutputDelta&) override { return Alive(0, 0); }
  bool Alive(int, int) override {
    const auto now = Clock::now();
    if (MsBetween(last_, now) < heartbeat_ms_) return true;
    last_ = now;
    return sink_.write(" ", 1);
  }

 private:
  httplib::DataSink& sink_;
  int heartbeat_ms_;
  Clock::time_point last_ = Clock::now();
};

// Server-sent events in the request's API's shapes (ReplyFormat); SSE comments as keep-alives
// and prefill progress.
class SseEmitter final : public Emitter {
 public:
  SseEmitter(httplib::DataSink& sink, ReplyFormat& format, int heartbeat_ms)
      : sink_(sink), format_(format), heartbeat_ms_(heartbeat_ms) {}

  bool Start() {
    format_.Start(events_);
    return Flush();
  }
  bool Delta(const OutputDelta& d) override {
    format_.Delta(d, events_);
    return Flush();
  }
  bool End(const FinishedReply& r) {
    format_.End(r, events_);
    return Flush() && (!format_.ends_with_done() || Write("data: [DONE]\n\n"));
  }
  void Error(const ApiError& e) {
    format_.Error(e, events_);
    if (Flush() && format_.ends_with_done()) Write("data: [DONE]\n\n");
  }
  bool Alive(int done, int total) override {
    if (MsBetween(last_, Clock::now()) < heartbeat_ms_) return true;
    if (done < 0) return Write(": queued\n\n");
    return Write(total > 0 ? ": prefill " + std::to_string(done) + "/" + std::to_string(total) + "\n\n" : ": keep-alive\n\n");
  }

 private:
  bool Write(const std::string& s) {
    last_ = Clock::now();
    return sink_.write(s.data(), s.size());
  }
  bool Flush() {
    bool ok = true;
    for (const SseEvent& e : events_) {
      ok = ok && Write((e.name.empty() ? "" : "event: " + e.name + "\n") + "data: " + DumpJson(e.data) + "\n\n");
    }
    events_.clear();
    return ok;
  }
  httplib::DataSink& sink_;
  ReplyFormat& format_;
  SseEvents events_;
  int heartbeat_ms_;
  Clock::time_point last_ = Clock::now();
};

}  // namespace

void Server::Impl::Serve(Job job, httplib::Response& res) {
  const int ctx = engine.options().context;
  if (static_cast<int>(job.prompt.size()) >= ctx) {
    throw ApiError(400, "invalid_request_error",
                   "the prompt is " + std::to_string(job.prompt.size()) + " tokens, over the context of " + std::to_string(ctx) +
                       " tokens per sequence (--ctx)",
                   "messages", "context_length_exceeded");
  }
  if (job.prompt.empty()) throw BadRequest("the prompt is empty", "prompt");
  auto shared = std::make_shared<Job>(std::move(job));
  const bool scripted = shared->request.scripted_output.has_value();
  if (!shared->request.stream) {
    // Queue here, before the status line: a timeout is still a proper 503.
    std::shared_ptr<SlotPool::Lease> lease;
    if (!scripted) {
      auto l = slots.Acquire(shared->prompt, shared->deadline, std::chrono::milliseconds(250), {});
      if (!l) throw ApiError(503, "server_error", "timed out waiting for a free slot", "", "timeout");
      lease = std::make_shared<SlotPool::Lease>(std::move(*l));
    }
    res.set_chunked_content_provider("application/json", [this, shared, lease](size_t, httplib::DataSink& sink) mutable {
      CollectingEmitter out(sink, opt.heartbeat_ms);
      OJson body;
      try {
        const Outcome o = Run(*shared, lease ? &lease->slot() : nullptr, out);
        lease.reset();
        Record(*shared, o);
        if (o.finish_reason == FinishReason::kCancelled) return false;
        body = shared->reply->Reply(o.Finished());
      } catch (const std::exception& e) {
        lease.reset();
        body = shared->reply->ErrorBody(ApiError(500, "server_error", e.what()));
      }
      const std::string s = DumpJson(body);
      sink.write(s.data(), s.size());
      sink.done();
      return true;
    });
    return;
  }
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider("text/event-stream", [this, shared, scripted](size_t, httplib::DataSink& sink) {
    Job& job = *shared;
    SseEmitter out(sink, *job.reply, opt.heartbeat_ms);
    std::optional<SlotPool::Lease> lease =
        scripted ? std::nullopt
                 : slots.Acquire(job.prompt, job.deadline, std::chrono::milliseconds(250),
                                 [&] { return out.Alive(-1, 0); });
    if (!scripted && !lease) {
      out.Error(ApiError(503, "server_error", "timed out waiting for a free slot", "", "timeout"));
      sink.done();
      return true;
    }
    try {
      if (!out.Start()) return false;
      const Outcome o = Run(job, lease ? &lease->slot() : nullptr, out);
      lease.reset();
      Record(job, o);
      if (o.finish_reason == FinishReason::kCancelled) return false;
      out.End(o.Finished());
    } catch (const std::exception& e) {
      lease.reset();
      out.Error(ApiError(500, "server_error", e.what()));
    }
    sink.done();
    return true;
  });
}

void Server::Impl::Setup() {
  // Bodies are read by the routes (ReadBody, which also bounds chunked ones); this bounds what
  // httplib would read itself.
  http.set_payload_max_length(opt.max_body_bytes);
  // Errors httplib answers itself (unknown route, unknown method, malformed HTTP), in OpenAI's format.
  http.set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    std::string message = "HTTP " + std::to_string(res.status);
    std::string type = "invalid_request_error";
    if (res.status == 404) message = "unknown endpoint: " + req.method + " " + req.path;
    if (res.status == 405) message = "method " + req.method + " is not allowed (GET and POST are)";
    if (res.status == 413) message = "the request body is over " + std::to_string(opt.max_body_bytes) + " bytes";
    if (res.status >= 500) type = "server_error";
    res.set_content(DumpJson(ApiError(res.status, type, message).Body()), "application/json");
    return httplib::Server::HandlerResponse::Handled;
  }));
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
    SendJson(res, 500, ApiError(500, "server_error", "internal error").Body());
  });

  Get("/health", "health", false, [](const httplib::Request&, const std::string&, httplib::Response& res) {
    SendJson(res, 200, {{"status", "ok"}});
  });
  Get("/v1/models", "models", true, [this](const httplib::Request&, const std::string&, httplib::Response& res) {
    OJson m = {{"id", opt.alias}, {"object", "model"}, {"created", 0}, {"owned_by", "dflash"}};
    m["meta"] = {{"n_ctx", engine.options().context},
                 {"n_vocab", engine.target_config().decoder.vocab_size},
                 {"draft", engine.has_draft()},
                 {"slots", slots.size()},
                 {"saved_sequences", slots.saved()}};
    SendJson(res, 200, {{"object", "list"}, {"data", OJson::array({m})}});
  });
  Get("/metrics", "metrics", true, [this](const httplib::Request&, const std::string&, httplib::Response& res) {
    const PoolGauges pool{slots.size(), slots.busy(), slots.queued(), slots.saved(), slots.sequence_bytes()};
    res.set_content(metrics.Render(pool) + (disk ? disk->RenderMetrics() : ""), "text/plain; version=0.0.4");
  });
  // Every API's requests become one ChatRequest, one rendering and one run; only the reply's
  // shapes (ReplyFormat) differ.
  Post("/v1/chat/completions", "chat", [this](const httplib::Request&, const std::string& body, httplib::Response& res) {
    const ChatRequest r = ParseChatRequest(ParseBody(body));
    Job job = ChatJob(r, "chat.completion", "chatcmpl-");
    job.endpoint = "chat";
    job.reply = std::make_unique<OpenAIReplyFormat>(job.header, /*chat=*/true, r.include_usage);
    Serve(std::move(job), res);
  });
  Post("/v1/completions", "completions", [this](const httplib::Request&, const std::string& body, httplib::Response& res) {
    Job job = CompletionJob(body);
    job.endpoint = "completions";
    job.reply = std::make_unique<OpenAIReplyFormat>(job.header, /*chat=*/false, job.request.include_usage);
    Serve(std::move(job), res);
  });
  Post("/v1/messages", "messages", [this](const httplib::Request&, const std::string& body, httplib::Response& res) {
    Job job = ChatJob(ParseAnthropicRequest(ParseBody(body)), "message", "msg_");
    job.endpoint = "messages";
    job.reply = std::make_unique<AnthropicReplyFormat>(job.header, static_cast<int>(job.prompt.size()));
    Serve(std::move(job), res);
  }, AnthropicErrorBody);
  Post("/v1/messages/count_tokens", "count_tokens", [this](const httplib::Request&, const std::string& body, httplib::Response& res) {
    const Job job = ChatJob(ParseAnthropicRequest(ParseBody(body), /*count_tokens=*/true), "message", "msg_");
    SendJson(res, 200, {{"input_tokens", job.prompt.size()}});
  }, AnthropicErrorBody);
  Post("/v1/responses", "responses", [this](const httplib::Request&, const std::string& body, httplib::Response& res) {
    Job job = ChatJob(ParseResponsesRequest(ParseBody(body)), "response", "resp_");
    job.endpoint = "responses";
    job.reply = std::make_unique<ResponsesReplyFormat>(job.header);
    Serve(std::move(job), res);
  });
  Post("/apply-template", "apply-template", [this](const httplib::Request&, const std::string& body, httplib::Response& res) {
    const ChatRequest r = ParseChatRequest(ParseBody(body));
    if (!chat_template) throw BadRequest("this model has no chat template");
    const bool use_tools = !r.tools.is_null() && r.tool_choice != ToolChoice::kNone;
    SendJson(res, 200, {{"prompt", chat_template->Render(r.messages, use_tools ? r.tools : OJson(), true, r.chat_template_kwargs)}});
  });
  Post("/tokenize", "tokenize", [this](const httplib::Request&, const std::string& text, httplib::Response& res) {
    const OJson body = ParseBody(text);
    const auto content = body.find("content");
    if (content == body.end() || !content->is_string()) throw BadRequest("'content' must be a string", "content");
    const auto special = body.find("add_special");
    if (special != body.end() && !special->is_boolean()) throw BadRequest("'add_special' must be a boolean", "add_special");
    std::vector<int32_t> ids;
    if (special != body.end() && special->get<bool>() && tok.bos_id() >= 0 && tok.add_bos()) ids.push_back(tok.bos_id());
    const std::vector<int32_t> encoded = tok.Encode(content->get<std::string>());
    ids.insert(ids.end(), encoded.begin(), encoded.end());
    SendJson(res, 200, {{"tokens", ids}});
  });
  Post("/detokenize", "detokenize", [this](const httplib::Request&, const std::string& text, httplib::Response& res) {
    const OJson body = ParseBody(text);
    const auto tokens = body.find("tokens");
    if (tokens == body.end() || !tokens->is_array()) throw BadRequest("'tokens' must be an array of token ids", "tokens");
    std::vector<int32_t> ids;
    for (const OJson& t : *tokens) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= tok.vocab_size()) {
        throw BadRequest("'tokens' entries must be token ids in [0, " + std::to_string(tok.vocab_size()) + ")", "tokens");
      }
      ids.push_back(t.get<int32_t>());
    }
    SendJson(res, 200, {{"content", tok.Decode(ids)}});
  });
  // Any other POST: refused before its body is read (httplib would read it whole first).
  http.Post(".*", [](const httplib::Request&, httplib::Response& res, const httplib::ContentReader&) { res.status = 404; });
}

Server::Server(Engine& engine, const text::Tokenizer& tokenizer, std::optional<ChatTemplate> chat_template,
               const GenerateOptions& defaults, const ServerOptions& options)
    : impl_(std::make_unique<Impl>(engine, tokenizer, std::move(chat_template), defaults, options)) {
  impl_->Setup();
}

Server::~Server() = default;

int Server::Bind() {
  const ServerOptions& o = impl_->opt;
  int port = o.port;
  if (port == 0) {
    port = impl_->http.bind_to_any_port(o.host);
    if (port < 0) Fail("cannot bind ", o.host, " on any port");
  } else if (!impl_->http.bind_to_port(o.host, port)) {
    Fail("cannot bind ", o.host, ":", port, " (in use, or not a local address)");
  }
  return port;
}

void Server::Listen() {
  impl_->http.listen_after_bind();
  impl_->slots.SaveAll();
}

void Server::Stop() { impl_->http.stop(); }

}  // namespace dflash::serve
