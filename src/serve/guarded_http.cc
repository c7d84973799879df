#include "serve/guarded_http.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "core/error.h"
#include "serve/api_error.h"
#include "serve/json_text.h"

namespace dflash::serve {

namespace {

using Clock = std::chrono::steady_clock;

// Set by a handler (or by an error status) while this pool thread serves one request.
thread_local bool close_after_response = false;

// Threads beyond max_connections: they answer the connections over the limit, so a refusal
// never waits behind the connections being served.
constexpr int kSpareThreads = 4;

// Waits are cut into slices this long so that a stopped server is noticed.
constexpr auto kSlice = std::chrono::milliseconds(100);

template <typename Fn>
ssize_t RetryOnSignal(Fn fn) {
  ssize_t r;
  do r = fn(); while (r < 0 && errno == EINTR);
  return r;
}

// A connection's socket as an httplib::Stream. Reads wait at most the per-read timeout and
// never past the current request's deadline; the read buffer lives as long as the connection,
// so a pipelined request is not lost between requests.
class DeadlineStream final : public httplib::Stream {
 public:
  DeadlineStream(socket_t sock, const std::atomic<socket_t>& listener, time_t read_timeout_s, time_t write_timeout_s)
      : sock_(sock), listener_(listener), read_timeout_(read_timeout_s), write_timeout_(write_timeout_s) {}

  // True when the next request's first bytes arrive (or are buffered) within `idle`.
  bool WaitForRequest(std::chrono::seconds idle) { return pos_ < end_ || Wait(POLLIN, Clock::now() + idle); }
  void StartRequest(Clock::time_point deadline) { deadline_ = deadline; }

  bool is_readable() const override {
    return pos_ < end_ || Wait(POLLIN, std::min(deadline_, Clock::now() + read_timeout_));
  }
  bool is_writable() const override { return Wait(POLLOUT, Clock::now() + write_timeout_) && PeerOpen(); }

  ssize_t read(char* ptr, size_t size) override {
    if (pos_ == end_) {
      if (!is_readable()) return -1;
      if (size >= sizeof buf_) return RetryOnSignal([&] { return ::recv(sock_, ptr, size, 0); });
      const ssize_t n = RetryOnSignal([&] { return ::recv(sock_, buf_, sizeof buf_, 0); });
      if (n <= 0) return n;
      pos_ = 0;
      end_ = static_cast<size_t>(n);
    }
    const size_t n = std::min(size, end_ - pos_);
    std::memcpy(ptr, buf_ + pos_, n);
    pos_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!is_writable()) return -1;
    return RetryOnSignal([&] { return ::send(sock_, ptr, size, MSG_NOSIGNAL); });
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override { Address(::getpeername, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { Address(::getsockname, ip, port); }
  socket_t socket() const override { return sock_; }

 private:
  // poll() for `events` until `until`; false on timeout, error, or a stopped server.
  bool Wait(short events, Clock::time_point until) const {
    while (true) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
      if (left.count() <= 0) return false;
      pollfd p{sock_, events, 0};
      const int r = ::poll(&p, 1, static_cast<int>(std::min(left, kSlice).count()));
      if (r > 0) return true;  // ready, or hung up: the read or write that follows says which
      if (r < 0 && errno != EINTR) return false;
      if (listener_ == INVALID_SOCKET) return false;
    }
  }

  // A client that closed its end: what lets a long generation notice that nobody reads it.
  bool PeerOpen() const {
    pollfd p{sock_, POLLIN, 0};
    if (::poll(&p, 1, 0) == 0) return true;
    char byte;
    return RetryOnSignal([&] { return ::recv(sock_, &byte, 1, MSG_PEEK); }) > 0;
  }

  template <typename NameFn>
  void Address(NameFn name, std::string& ip, int& port) const {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    if (name(sock_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return;
    char host[NI_MAXHOST], serv[NI_MAXSERV];
    if (::getnameinfo(reinterpret_cast<sockaddr*>(&addr), len, host, sizeof host, serv, sizeof serv,
                      NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
      return;
    }
    ip = host;
    port = std::atoi(serv);
  }

  socket_t sock_;
  const std::atomic<socket_t>& listener_;
  std::chrono::seconds read_timeout_, write_timeout_;
  Clock::time_point deadline_ = Clock::time_point::max();
  char buf_[4096];
  size_t pos_ = 0, end_ = 0;
};

// Closes a connection after its last answer. Closing with unread bytes (a refused body) would
// reset it, and the client could lose the answer: so the write side is shut first and what the
// client still sends is read and dropped for a moment.
void DrainAndClose(socket_t sock) {
  ::shutdown(sock, SHUT_WR);
  const auto until = Clock::now() + std::chrono::milliseconds(250);
  char scratch[4096];
  for (auto left = until - Clock::now(); left.count() > 0; left = until - Clock::now()) {
    pollfd p{sock, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(left).count())) <= 0) break;
    if (RetryOnSignal([&] { return ::recv(sock, scratch, sizeof scratch, 0); }) <= 0) break;
  }
  ::close(sock);
}

// Answers a connection over the limit without reading its request.
void Refuse(socket_t sock, int max_connections) {
  const std::string body = DumpJson(ApiError(503, "server_error",
                                             "too many connections (the server serves " + std::to_string(max_connections) +
                                                 " at once, --max-connections); try again",
                                             "", "too_many_connections")
                                        .Body());
  const std::string response = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: " +
                               std::to_string(body.size()) + "\r\nRetry-After: 1\r\nConnection: close\r\n\r\n" + body;
  RetryOnSignal([&] { return ::send(sock, response.data(), response.size(), MSG_NOSIGNAL); });
}

}  // namespace

GuardedHttpServer::GuardedHttpServer(const ConnectionLimits& limits) : limits_(limits) {
  if (limits.max_connections < 1) Fail("--max-connections must be at least 1, got ", limits.max_connections);
  if (!(limits.request_timeout_s > 0)) Fail("--request-timeout must be positive, got ", limits.request_timeout_s);
  new_task_queue = [threads = limits.max_connections + kSpareThreads] { return new httplib::ThreadPool(threads); };
  set_pre_routing_handler([](const httplib::Request& req, httplib::Response& res) {
    // httplib reads the body of a PUT, PATCH, DELETE or PRI whole, a chunked one without a
    // limit, before routing it: this server has no such routes.
    if (req.method != "GET" && req.method != "HEAD" && req.method != "POST" && req.method != "OPTIONS") {
      res.status = 405;
      return HandlerResponse::Handled;
    }
    // Nor does it read the body of a GET: what is left of it must not be the next request.
    if (req.method != "POST" && (req.get_header_value<uint64_t>("Content-Length") > 0 || req.has_header("Transfer-Encoding"))) {
      close_after_response = true;
    }
    return HandlerResponse::Unhandled;
  });
  set_post_routing_handler([](const httplib::Request&, httplib::Response& res) {
    if (res.status >= 400) close_after_response = true;
    if (!close_after_response) return;
    res.headers.erase("Keep-Alive");
    res.headers.erase("Connection");
    res.set_header("Connection", "close");
  });
}

void GuardedHttpServer::CloseAfterResponse() { close_after_response = true; }

void GuardedHttpServer::ServeConnection(socket_t sock) {
  DeadlineStream stream(sock, svr_sock_, read_timeout_sec_, write_timeout_sec_);
  const auto request_timeout = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(limits_.request_timeout_s));
  for (size_t left = keep_alive_max_count_; left > 0; --left) {
    if (!stream.WaitForRequest(std::chrono::seconds(keep_alive_timeout_sec_))) return;
    stream.StartRequest(Clock::now() + request_timeout);
    close_after_response = false;
    bool closed = false;
    if (!process_request(stream, left == 1, closed, nullptr) || closed || close_after_response) return;
  }
}

bool GuardedHttpServer::process_and_close_socket(socket_t sock) {
  // Runs on a pool thread: nothing may escape it.
  const int open = connections_.fetch_add(1) + 1;
  try {
    if (open > limits_.max_connections) {
      Refuse(sock, limits_.max_connections);
    } else {
      ServeConnection(sock);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dflash serve: connection dropped: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "dflash serve: connection dropped: unknown exception\n");
  }
  DrainAndClose(sock);
  connections_.fetch_sub(1);
  return true;
}

}  // namespace dflash::serve
