#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "runtime/errors.hpp"
#include "runtime/http/exchange.hpp"
#include "runtime/http/types.hpp"

namespace outrider::runtime {

struct http_server_core;

/// An HTTP/1.1 server on Boost.Beast: a fixed set of I/O threads serves
/// every connection asynchronously (never a thread per connection).
/// Keep-alive; pipelined requests are answered in order; chunked request
/// bodies; HEAD. Refused before a handler sees them: malformed requests
/// (400), repeated or conflicting Content-Length (400), invalid UTF-8 in the
/// target or a header (400), too many or too large headers (431), a body
/// over the limit (413), a request not complete within the read deadline
/// (408), versions other than 1.0 and 1.1 (505). Beyond `max_connections`
/// the connection idle longest (waiting for a request) is closed to make
/// room; when none is idle, a new connection gets a fast 503 with
/// Retry-After and is closed, except in
/// `reserved_connections` kept for one request each to `reserved_paths`
/// (probes) within a short read deadline. A client
/// that closes its connection while its request is handled marks the
/// exchange gone. No exception escapes a handler (it becomes a 500).
class http_server {
 public:
  /// Gets every request on an I/O thread; must not block (hand the
  /// exchange to another thread for long work).
  using async_handler = std::function<void(std::shared_ptr<http_exchange>)>;
  /// A short handler run on an I/O thread; its result is the answer.
  using handler = std::function<http_response(const http_request&)>;

  /// `name` labels the server's metrics (e.g. "frontend", "status").
  http_server(std::string name, async_handler h, http_limits lim = {});
  http_server(std::string name, handler h, http_limits lim = {});
  ~http_server();
  http_server(const http_server&) = delete;
  http_server& operator=(const http_server&) = delete;

  /// Serves TLS (1.2 and later) with this certificate chain and key (PEM
  /// contents); with a CA, clients must present a certificate it signed.
  /// `invalid_argument` when OpenSSL refuses them (or the key does not
  /// match the certificate). Before start(), or after it to reload: new
  /// connections get the new certificate, those open keep theirs; on an
  /// error nothing changes.
  caf::error use_tls(const std::string& cert_pem, const std::string& key_pem,
                     const std::string& ca_pem = {});
  /// Binds and starts serving; `bind_failed` when it cannot.
  caf::error start(const std::string& host, uint16_t port);
  uint16_t port() const { return port_; }

  /// Closes the listener and every connection (exchanges in flight become
  /// gone), waits up to `grace` for handlers to release their exchanges,
  /// then stops the I/O threads. Idempotent.
  void stop(std::chrono::milliseconds grace = std::chrono::seconds{10});

  /// Connections open now, and those of them waiting for a request.
  size_t connections() const;
  size_t idle_connections() const;

 private:
  std::shared_ptr<http_server_core> core_;
  uint16_t port_ = 0;
};

} // namespace outrider::runtime
