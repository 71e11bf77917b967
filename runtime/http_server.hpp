#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <thread>

namespace outrider::runtime {

struct http_request {
  std::string method;
  std::string target;                         // path and query as sent
  std::string path;                           // target without the query
  std::map<std::string, std::string> headers; // names lower-cased
  std::string body;
};

struct http_response {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::map<std::string, std::string> headers;
};

/// A small HTTP/1.1 server for short request/response exchanges (status,
/// probes, metrics). One thread polls every connection; each connection
/// carries one request and is closed after the response. Malformed, oversized
/// or slow requests get 400, 413, 431, 408 or 505 without reaching the handler.
class http_server {
 public:
  using handler = std::function<http_response(const http_request&)>;

  struct limits {
    size_t max_header_bytes = 8192;
    size_t max_body_bytes = 1 << 20;
    size_t max_connections = 256;
    std::chrono::milliseconds request_timeout{5000};
  };

  explicit http_server(handler h) : http_server(std::move(h), limits{}) {}
  http_server(handler h, limits lim);
  ~http_server();

  http_server(const http_server&) = delete;
  http_server& operator=(const http_server&) = delete;

  /// Binds and starts serving; returns an error text on failure, else empty.
  std::string start(const std::string& host, uint16_t port);

  /// The bound port (useful after binding port 0).
  uint16_t port() const { return port_; }

  /// Stops the poll thread and closes every connection. Idempotent.
  void stop();

 private:
  void run();

  handler handler_;
  limits limits_;
  int listen_fd_ = -1;
  int wake_pipe_[2] = {-1, -1};
  uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

/// Reason phrase for a status code.
const char* http_reason(int status);

/// Parses one request from `in`: 0 while incomplete, 1 when `req` is
/// complete, -1 when malformed or too large (`err` holds the answer).
int parse_http_request(const std::string& in, const http_server::limits& lim,
                       http_request& req, http_response& err);

/// The response's bytes (status line, headers, body unless `head_only`).
std::string serialize_http_response(const http_response& r, bool head_only);

} // namespace outrider::runtime
