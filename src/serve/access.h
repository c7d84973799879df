// Who may drive a local server (`dflash serve`, `dflash trace record`), checked before a
// request's body is read. Each check throws ApiError (OpenAI's error format).
//  - Host: a server listening on a loopback address answers only requests addressed to a local
//    name (localhost, 127.x.x.x, [::1], the address it listens on). A web page whose domain an
//    attacker points at 127.0.0.1 (DNS rebinding) sends its own domain as Host.
//  - Origin: browsers mark requests a page sends with Origin, and send a POST without asking
//    first (CORS preflight) only when its Content-Type is a form's or text/plain. A POST with an
//    Origin must therefore be application/json, which a page cannot send without a preflight
//    that this server never grants. curl, SDKs and agents send no Origin: `curl -d` still works.
//  - API key: `Authorization: Bearer KEY` (OpenAI's clients) or `x-api-key: KEY` (Anthropic's),
//    compared in constant time.
#pragma once

#include <httplib.h>

#include <string>
#include <string_view>

namespace dflash::serve {

struct AccessPolicy {
  std::string listen_host;  // the address the server is bound to
  std::string api_key;      // empty: none required
};

void CheckHostAndOrigin(const AccessPolicy& policy, const httplib::Request& req);
void CheckApiKey(const AccessPolicy& policy, const httplib::Request& req);

// localhost, 127.0.0.0/8 or ::1 (brackets allowed).
bool IsLoopbackName(std::string_view host);

// The host name of a Host header value: "h:8080" -> "h", "[::1]:8080" -> "::1", lower case.
std::string HostName(std::string_view host_header);

// Equality whose time does not depend on where the strings first differ.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

// The request's body read through `reader`, refused with 413 as soon as it is over `limit`
// bytes, however it is sent (Content-Length, chunked, compressed): a declared length over the
// limit is refused before a byte is read, a chunked one when the limit is crossed.
std::string ReadBody(const httplib::Request& req, const httplib::ContentReader& reader, size_t limit);

}  // namespace dflash::serve
