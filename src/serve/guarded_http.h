// cpp-httplib's server (Debian's 0.11) with the limits a server facing untrusted clients needs
// and that version lacks. It times out each read, but a client that sends one header line every
// few seconds (slow loris) holds a pool thread forever; it has no limit on connections, and a
// pool thread per connection means a few such clients starve everyone, /health included.
//
// Here each connection is served through a stream whose reads share one deadline per request
// (request line, headers and body must all arrive within `request_timeout_s`); at most
// `max_connections` are served at once, on a pool with threads to spare, and any more are
// answered 503 and closed straight away. A response with an error status closes its
// connection: the request's body may not have been read (a request is refused before its body
// is read), and what is left of it must not be taken for the next request.
#pragma once

#include <httplib.h>

#include <atomic>

namespace dflash::serve {

struct ConnectionLimits {
  int max_connections = 64;
  double request_timeout_s = 30;  // from a request's first byte to its last
};

class GuardedHttpServer : public httplib::Server {
 public:
  explicit GuardedHttpServer(const ConnectionLimits& limits);

  // From a handler: close the connection after this response.
  static void CloseAfterResponse();

 private:
  bool process_and_close_socket(socket_t sock) override;
  void ServeConnection(socket_t sock);

  ConnectionLimits limits_;
  std::atomic<int> connections_{0};
};

}  // namespace dflash::serve
