#include "serve/access.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>

#include "serve/api_error.h"

namespace dflash::serve {

namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The media type of a Content-Type value, without parameters: "Application/JSON; charset=utf-8"
// -> "application/json".
std::string MediaType(std::string_view content_type) {
  std::string_view t = content_type.substr(0, content_type.find(';'));
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.remove_suffix(1);
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.front()))) t.remove_prefix(1);
  return Lower(t);
}

}  // namespace

std::string HostName(std::string_view host_header) {
  std::string_view h = host_header;
  if (!h.empty() && h.front() == '[') {
    h = h.substr(1, h.find(']') == std::string_view::npos ? std::string_view::npos : h.find(']') - 1);
  } else if (std::count(h.begin(), h.end(), ':') == 1) {
    h = h.substr(0, h.find(':'));
  }
  if (!h.empty() && h.back() == '.') h.remove_suffix(1);  // "localhost." is localhost
  return Lower(h);
}

bool IsLoopbackName(std::string_view host) {
  const std::string h = HostName(host);
  if (h == "localhost") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, h.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  return inet_pton(AF_INET6, h.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  const size_t n = std::max(a.size(), b.size());
  size_t diff = a.size() ^ b.size();
  for (size_t i = 0; i < n; ++i) {
    diff |= static_cast<unsigned char>(i < a.size() ? a[i] : 0) ^ static_cast<unsigned char>(i < b.size() ? b[i] : 0);
  }
  return diff == 0;
}

void CheckHostAndOrigin(const AccessPolicy& policy, const httplib::Request& req) {
  if (IsLoopbackName(policy.listen_host) && req.has_header("Host")) {
    const std::string host = HostName(req.get_header_value("Host"));
    if (!IsLoopbackName(host) && host != HostName(policy.listen_host)) {
      throw ApiError(403, "invalid_request_error",
                     "Host '" + host + "' is not a local name, and this server listens on " + policy.listen_host +
                         " only (requests from web pages that rebind a domain to this machine are refused)",
                     "", "invalid_host");
    }
  }
  if (req.method == "POST" && req.has_header("Origin") && MediaType(req.get_header_value("Content-Type")) != "application/json") {
    throw ApiError(415, "invalid_request_error",
                   "a request from a web page (Origin: " + req.get_header_value("Origin") +
                       ") must send Content-Type: application/json",
                   "", "unsupported_content_type");
  }
}

void CheckApiKey(const AccessPolicy& policy, const httplib::Request& req) {
  if (policy.api_key.empty()) return;
  const std::string bearer = req.get_header_value("Authorization");
  const std::string x_api_key = req.get_header_value("x-api-key");
  if (bearer.empty() && x_api_key.empty()) {
    throw ApiError(401, "authentication_error", "missing API key (Authorization: Bearer KEY, or x-api-key: KEY)", "",
                   "invalid_api_key");
  }
  // Whichever the client sent must be right; a client sending both must send the key in both.
  if ((!bearer.empty() && !ConstantTimeEquals(bearer, "Bearer " + policy.api_key)) ||
      (!x_api_key.empty() && !ConstantTimeEquals(x_api_key, policy.api_key))) {
    throw ApiError(401, "authentication_error", "invalid API key", "", "invalid_api_key");
  }
}

std::string ReadBody(const httplib::Request& req, const httplib::ContentReader& reader, size_t limit) {
  const ApiError too_large(413, "invalid_request_error", "the request body is over " + std::to_string(limit) + " bytes (--max-body)",
                           "", "request_too_large");
  if (req.is_multipart_form_data()) {
    throw ApiError(415, "invalid_request_error", "multipart bodies are not accepted: send JSON", "", "unsupported_content_type");
  }
  if (req.has_header("Content-Length") && req.get_header_value<uint64_t>("Content-Length") > limit) throw too_large;
  std::string body;
  bool over = false;
  const bool complete = reader([&](const char* data, size_t n) {
    over = n > limit - body.size();
    if (!over) body.append(data, n);
    return !over;
  });
  if (over) throw too_large;
  if (!complete) throw BadRequest("the request body could not be read: cut short, malformed, or not sent in time");
  return body;
}

}  // namespace dflash::serve
