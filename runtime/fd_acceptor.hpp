#pragma once

// A listening socket whose accept loop is outrider's, for servers that can
// take an accepted connection's descriptor (gRPC: AddInsecureChannelFromFd)
// but whose own accept loop cannot be bounded. gRPC 1.51's listener stops
// for good when accept() fails (EMFILE: every descriptor taken by idle
// connections) and offers no hook to keep descriptors back; this one
//   - never takes the process's last `fd_reserve` descriptors: a
//     connection accepted into them is closed at once (counted);
//   - backs off (10 ms doubling to 1 s) when accept() fails, and goes on;
//   - hands a connection over only once its first bytes have come (the
//     HTTP/2 preface), within `first_bytes_timeout`, and holds at most
//     `max_pending` such connections: silent connections never reach the
//     server (whose handshake timeout does not apply to connections it is
//     handed) and cost a bounded number of descriptors for a bounded time.
// One I/O thread per acceptor (Boost.Asio), whatever the connections.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "runtime/errors.hpp"

namespace outrider::runtime {

/// Whether descriptor `fd` is one of the process's last `reserve`:
/// descriptors are handed out lowest first, so a number at or above
/// limit - reserve means every one below it is in use. The limit is read
/// each time (an operator or a test may change it on a running process).
bool in_descriptor_reserve(int fd, size_t reserve);

/// The wait before accepting again after the accept that failed after
/// waiting `last` (0 at the first failure): 10 ms, doubling to 1 s.
inline std::chrono::milliseconds
accept_backoff(std::chrono::milliseconds last) {
  return std::min(std::max(last * 2, std::chrono::milliseconds{10}),
                  std::chrono::milliseconds{1000});
}

struct fd_acceptor_config {
  /// Metric label and log name ("relay", "grpc", "epp").
  std::string name;
  /// The process's last descriptors no connection may take.
  size_t fd_reserve = 64;
  /// A connection whose first bytes have not come by then is closed.
  std::chrono::milliseconds first_bytes_timeout{std::chrono::seconds{10}};
  /// Connections waiting for their first bytes, at most; past it a new
  /// one is closed at once.
  size_t max_pending = 1024;
};

struct fd_acceptor_state;

class fd_acceptor {
 public:
  /// Gets each connection's descriptor (non-blocking, close-on-exec,
  /// TCP_NODELAY), and owns it from then on. Called on the acceptor's
  /// thread; must not block.
  using take_fn = std::function<void(int fd)>;

  explicit fd_acceptor(fd_acceptor_config cfg);
  ~fd_acceptor();
  fd_acceptor(const fd_acceptor&) = delete;
  fd_acceptor& operator=(const fd_acceptor&) = delete;

  /// Binds `host:port` (port 0: any free one): `invalid_argument` when
  /// `host` is not an IP address (brackets allowed, "localhost" taken as
  /// 127.0.0.1), `bind_failed` when it cannot. Nothing is accepted before
  /// `start`.
  caf::error bind(const std::string& host, uint16_t port);
  uint16_t port() const { return port_; }
  /// Starts accepting, each ready connection handed to `take`.
  void start(take_fn take);
  /// Closes the listener and every connection not yet handed over, and
  /// ends the thread. Idempotent.
  void stop();

 private:
  fd_acceptor_config cfg_;
  std::shared_ptr<fd_acceptor_state> st_;
  uint16_t port_ = 0;
};

} // namespace outrider::runtime
