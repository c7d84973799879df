// The recording proxy: each request is forwarded on its own upstream connection by a worker
// thread that feeds the bytes through a pipe to the client as they arrive, so streams keep
// their timing, and writes the exchange to the trace directory when the answer is complete.
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "serve/access.h"
#include "serve/api_error.h"
#include "serve/guarded_http.h"
#include "serve/json_text.h"
#include "serve/trace.h"

namespace dflash::serve {

namespace {

using OJson = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Upstream bytes on their way to the client.
struct Pipe {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::string> chunks;
  bool headers = false, done = false, client_gone = false;
  int status = 502;
  std::string content_type = "application/json";
};

// SSE "data:" lines with their arrival times, cut from the byte stream as lines complete.
class EventLog {
 public:
  explicit EventLog(Clock::time_point t0) : t0_(t0) {}
  void Add(std::string_view bytes) {
    pending_.append(bytes);
    for (size_t nl; (nl = pending_.find('\n')) != std::string::npos; pending_.erase(0, nl + 1)) {
      std::string_view line(pending_.data(), nl);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (line.rfind("data:", 0) != 0) continue;
      line.remove_prefix(5);
      if (!line.empty() && line.front() == ' ') line.remove_prefix(1);
      events_.push_back({{"ms", MsSince(t0_)}, {"data", std::string(line)}});
    }
  }
  OJson events() const { return events_; }

 private:
  Clock::time_point t0_;
  std::string pending_;
  OJson events_ = OJson::array();
};

void WriteExchange(const std::string& dir, int index, OJson record) {
  char name[32];
  std::snprintf(name, sizeof name, "%06d.json", index);
  const std::filesystem::path path = std::filesystem::path(dir) / name;
  // Written aside and renamed into place: a reader never sees, and a recorder stopped mid-write
  // never leaves, an empty or partial NNNNNN.json (replay ignores the .tmp name).
  std::filesystem::path partial = path;
  partial += ".tmp";
  const std::string text = DumpJson(record, 1) + "\n";
  {
    std::ofstream out(partial);
    out << text;
    if (!out) {
      std::fprintf(stderr, "trace record: cannot write %s\n", partial.string().c_str());
      std::error_code ignored;
      std::filesystem::remove(partial, ignored);
      return;
    }
  }
  std::error_code error;
  std::filesystem::rename(partial, path, error);
  if (error) std::fprintf(stderr, "trace record: cannot rename %s: %s\n", partial.string().c_str(), error.message().c_str());
}

// The largest request body the proxy takes (agents' conversations, not uploads).
constexpr size_t kMaxBody = 64u << 20;

class Recorder {
 public:
  explicit Recorder(const RecorderOptions& options) : options_(options), access_{options.host, options.api_key} {}

  // Refused requests (not local, no key, too large) are answered here, neither forwarded nor recorded.
  void Handle(const httplib::Request& req, const httplib::ContentReader* reader, httplib::Response& res) {
    try {
      CheckHostAndOrigin(access_, req);
      CheckApiKey(access_, req);
      Forward(req, reader ? ReadBody(req, *reader, kMaxBody) : std::string(), res);
    } catch (const ApiError& e) {
      res.status = e.status();
      res.set_content(DumpJson(e.Body()), "application/json");
    }
  }

 private:
  void Forward(const httplib::Request& req, std::string request_body, httplib::Response& res) {
    const int index = next_index_.fetch_add(1) + 1;
    const Clock::time_point t0 = Clock::now();
    std::call_once(first_, [&] { first_request_ = t0; });
    OJson record = {{"index", index}, {"method", req.method}, {"path", req.path},
                    {"offset_ms", std::chrono::duration<double, std::milli>(t0 - first_request_).count()}};
    bool stream = false;
    if (!request_body.empty()) {
      try {
        OJson body = OJson::parse(request_body);
        stream = body.is_object() && body.value("stream", false) == true;
        record["request"] = std::move(body);
      } catch (const nlohmann::json::exception&) {
        record["request_text"] = request_body;  // written with invalid UTF-8 replaced (DumpJson)
      }
    }
    record["stream"] = stream;

    auto pipe = std::make_shared<Pipe>();
    httplib::Request up;
    up.method = req.method;
    up.path = req.target.empty() ? req.path : req.target;
    up.body = std::move(request_body);
    // With --api-key the client has sent that key (CheckApiKey): it goes upstream as sent.
    for (const char* h : {"Authorization", "x-api-key", "anthropic-version", "anthropic-beta", "Content-Type", "Accept", "User-Agent"}) {
      if (req.has_header(h)) up.set_header(h, req.get_header_value(h));
    }
    std::thread(&Recorder::Relay, this, std::move(up), pipe, std::move(record), index, t0).detach();

    std::unique_lock lock(pipe->mu);
    pipe->cv.wait(lock, [&] { return pipe->headers || pipe->done; });
    res.status = pipe->status;
    const std::string content_type = pipe->content_type;
    lock.unlock();
    res.set_chunked_content_provider(content_type, [pipe](size_t, httplib::DataSink& sink) {
      std::unique_lock lock(pipe->mu);
      pipe->cv.wait(lock, [&] { return !pipe->chunks.empty() || pipe->done; });
      while (!pipe->chunks.empty()) {
        std::string chunk = std::move(pipe->chunks.front());
        pipe->chunks.pop_front();
        lock.unlock();
        const bool ok = sink.write(chunk.data(), chunk.size());
        lock.lock();
        if (!ok) {
          pipe->client_gone = true;  // the worker stops reading upstream, which cancels there
          return false;
        }
      }
      if (pipe->done) sink.done();
      return true;
    });
  }

  // Runs on a detached thread, so nothing may escape it: a failure ends the client's answer
  // (a 502 if nothing was sent yet) and is reported, the exchange is not written.
  void Relay(httplib::Request up, std::shared_ptr<Pipe> pipe, OJson record, int index, Clock::time_point t0) {
    try {
      Exchange(std::move(up), pipe, std::move(record), index, t0);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "trace record: request %d: %s\n", index, e.what());
      Fail502(*pipe, std::string("trace proxy: ") + e.what());
    }
  }

  static void Fail502(Pipe& pipe, const std::string& message) {
    std::lock_guard lock(pipe.mu);
    if (!pipe.headers) {
      pipe.status = 502;
      pipe.chunks.push_back(DumpJson(OJson{{"error", {{"message", message}, {"type", "upstream_error"}}}}));
    }
    pipe.done = true;
    pipe.cv.notify_all();
  }

  void Exchange(httplib::Request up, std::shared_ptr<Pipe> pipe, OJson record, int index, Clock::time_point t0) {
    EventLog events(t0);
    std::string body;
    up.response_handler = [&](const httplib::Response& r) {
      std::lock_guard lock(pipe->mu);
      pipe->status = r.status;
      if (r.has_header("Content-Type")) pipe->content_type = r.get_header_value("Content-Type");
      pipe->headers = true;
      pipe->cv.notify_all();
      return true;
    };
    up.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
      events.Add({data, n});
      body.append(data, n);
      std::lock_guard lock(pipe->mu);
      pipe->chunks.emplace_back(data, n);
      pipe->cv.notify_all();
      return !pipe->client_gone;
    };
    httplib::Client client(options_.upstream);
    client.set_read_timeout(3600, 0);
    client.set_write_timeout(600, 0);
    const httplib::Result result = client.send(up);
    if (!result) Fail502(*pipe, "trace proxy: upstream " + options_.upstream + ": " + httplib::to_string(result.error()));
    {
      std::lock_guard lock(pipe->mu);
      record["status"] = pipe->status;
      if (pipe->client_gone) record["client_disconnected"] = true;
      pipe->done = true;
      pipe->cv.notify_all();
    }
    record["wall_ms"] = MsSince(t0);
    if (record["stream"] == true) {
      record["events"] = events.events();
    } else {
      try {
        record["response"] = OJson::parse(body);
      } catch (const nlohmann::json::exception&) {
        record["response_text"] = body;
      }
    }
    WriteExchange(options_.out_dir, index, std::move(record));
  }

  RecorderOptions options_;
  AccessPolicy access_;
  std::atomic<int> next_index_{0};
  std::once_flag first_;
  Clock::time_point first_request_;
};

}  // namespace

void RunRecorder(const RecorderOptions& options) {
  if (options.upstream.rfind("http://", 0) != 0) Fail("trace record: --upstream must be http://HOST:PORT, got '", options.upstream, "'");
  std::filesystem::create_directories(options.out_dir);
  Recorder recorder(options);
  GuardedHttpServer server(ConnectionLimits{64, 600});
  server.set_read_timeout(600, 0);
  server.set_payload_max_length(kMaxBody);
  server.Get(".*", [&](const httplib::Request& req, httplib::Response& res) { recorder.Handle(req, nullptr, res); });
  server.Post(".*", [&](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& body) {
    recorder.Handle(req, &body, res);
  });
  if (!server.bind_to_port(options.host, options.port)) {
    Fail("trace record: cannot listen on ", options.host, ":", options.port);
  }
  std::fprintf(stderr, "trace record: http://%s:%d -> %s, writing %s\n", options.host.c_str(), options.port,
               options.upstream.c_str(), options.out_dir.c_str());
  server.listen_after_bind();
}

}  // namespace dflash::serve
