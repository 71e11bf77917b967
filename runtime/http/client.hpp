#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace outrider::runtime {

/// Where a plain-HTTP client goes: `http://host:port[/path]` (an IPv6
/// host in brackets).
struct http_url {
  std::string host;
  uint16_t port = 0;
  std::string target; ///< the path, `default_path` when the URL has none
};
/// Parsed, or nullopt with `*why`: another scheme (https too: these
/// clients speak no TLS), no port, a bad host or port, a space or control
/// character.
std::optional<http_url> parse_http_url(const std::string& url,
                                       const std::string& default_path,
                                       std::string* why);

/// A plain-HTTP GET's answer, or why there is none (`error` non-empty:
/// unreachable, timed out, over `max_body`, not HTTP).
struct http_fetch {
  int status = 0;
  std::string body;
  std::string error;
};

/// One GET over plain HTTP/1.1 to `host:port` (Boost.Beast), within
/// `timeout` from the first connect attempt to the last byte, reading at
/// most `max_body` bytes of body. Blocks the calling thread; for the rare
/// control-plane reads (an engine's discovery or metrics endpoint), not
/// for a request path.
http_fetch http_get(const std::string& host, uint16_t port,
                    const std::string& target,
                    std::chrono::milliseconds timeout,
                    size_t max_body = 1 << 20);

/// One POST of `body` (as `content_type`) over plain HTTP/1.1, with the
/// same deadline and bound on the answer as `http_get` (the trace
/// exporter's, off any request path).
http_fetch http_post(const std::string& host, uint16_t port,
                     const std::string& target, const std::string& body,
                     const std::string& content_type,
                     std::chrono::milliseconds timeout,
                     size_t max_body = 1 << 20);

} // namespace outrider::runtime
