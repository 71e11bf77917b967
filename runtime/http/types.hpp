#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace outrider::runtime {

struct http_request {
  std::string method;
  std::string target;                         // path and query as sent
  std::string path;                           // target without the query
  std::map<std::string, std::string> headers; // names lower-cased
  std::string body;
  bool keep_alive = true; // what the client asked for
};

struct http_response {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::map<std::string, std::string> headers;
};

/// The limits every listener enforces before a handler sees a request.
struct http_limits {
  size_t header_bytes = 16384; // request line and headers together (431)
  size_t max_headers = 100;    // header fields (431)
  size_t body_bytes = 1 << 20; // decoded body, chunked or not (413)
  /// Bytes of request bodies being read or held by handlers, all
  /// connections together (a body counts from its header, for its
  /// Content-Length or, chunked, for `body_bytes`, until the handler drops
  /// it or answers): a request that would pass it gets a fast 503 with
  /// Retry-After instead of its body being read. 0: unbounded.
  size_t body_budget = 0;
  size_t max_connections = 10000; // beyond: a fast 503 with Retry-After
  /// Descriptors this listener leaves to the rest of the process: a
  /// connection accepted onto one of the last `fd_reserve` descriptors of
  /// the process's limit gets the fast 503 and is closed at once, so that a
  /// flood of connections here cannot take the descriptors the probes, the
  /// store, discovery and the gRPC listeners need. 0: none kept.
  size_t fd_reserve = 64;
  /// Beyond `max_connections`, this many more connections are still read,
  /// for one request each to a path of `reserved_paths` (others: 503),
  /// within `reserved_read_timeout`, then closed: a prober gets through
  /// while clients hold every ordinary slot.
  size_t reserved_connections = 0;
  std::vector<std::string> reserved_paths;
  std::chrono::milliseconds reserved_read_timeout{2000};
  /// From a request's first byte to its last (408).
  std::chrono::milliseconds read_timeout{10000};
  /// A kept-alive connection waiting for its next request (closed).
  std::chrono::milliseconds idle_timeout{60000};
  /// One write's progress; a reader that stops reading is cut off, and so
  /// is one whose queued bytes pass `max_queued_bytes`.
  std::chrono::milliseconds send_timeout{30000};
  size_t max_queued_bytes = 4 << 20;
  size_t io_threads = 1;
};

/// Reason phrase for a status code.
const char* http_reason(int status);

/// A JSON error body `{"error":{"code":N,"message":"..."}}`.
http_response http_error(int status, const std::string& message);

} // namespace outrider::runtime
