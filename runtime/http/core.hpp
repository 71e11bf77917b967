#pragma once

// Internal to the HTTP server: what the listener and its sessions share.

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "runtime/http/server.hpp"
#include "runtime/metrics.hpp"

namespace outrider::runtime {

namespace net = boost::asio;
using tcp = net::ip::tcp;

/// Why a request was refused before its handler (a metric label each).
enum class http_refusal {
  malformed,
  bad_utf8,
  header_too_large,
  body_too_large,
  read_timeout,
  version,
  too_many_connections,
  slow_reader,
  tls_handshake,
  body_budget,
  descriptor_reserve,
};

struct http_server_core;

/// A request body's share of `http_limits::body_budget`, given back when
/// destroyed (the exchange holds it until the handler drops the body).
class http_body_hold {
 public:
  http_body_hold(std::shared_ptr<http_server_core> core, size_t bytes)
    : core_(std::move(core)), bytes_(bytes) {}
  ~http_body_hold();
  http_body_hold(const http_body_hold&) = delete;
  http_body_hold& operator=(const http_body_hold&) = delete;

 private:
  std::shared_ptr<http_server_core> core_;
  size_t bytes_;
};

struct http_server_core {
  http_server_core(std::string name, http_server::async_handler h,
                   http_limits lim);

  void refused(http_refusal why) { refusals[static_cast<size_t>(why)]->inc(); }
  void opened();
  void closed(const void* session);
  /// Connections waiting for a request's first byte, oldest first: the
  /// cheapest to give up when every slot is taken (the client reconnects).
  uint64_t idle_begin(std::function<void()> evict);
  void idle_end(uint64_t key);
  /// Closes the connection idle longest; false when none is idle.
  bool evict_idle();
  /// Takes `bytes` of the body budget; false (nothing taken) when they do
  /// not fit. Always true without a budget.
  bool reserve_body(size_t bytes);
  void release_body(size_t bytes);

  std::string name;
  http_server::async_handler handler;
  http_limits lim;
  // One io_context per I/O thread, run by that thread alone; each
  // connection lives on one of them, handed out in turn, so its handlers
  // never run at once without a strand (the strand's hop per posted token
  // and per write: without it the router's CPU per token through the mux
  // fell 15-25% at model speed, docs/performance.md).
  std::vector<std::unique_ptr<net::io_context>> iocs = [n = lim.io_threads] {
    std::vector<std::unique_ptr<net::io_context>> v;
    for (size_t i = 0; i < std::max<size_t>(1, n); ++i)
      v.push_back(std::make_unique<net::io_context>(1));
    return v;
  }();
  net::io_context& ioc = *iocs.front(); // the listener's
  std::atomic<size_t> next_ioc{0};
  /// The io_context for the next connection.
  net::io_context& pick() { return *iocs[next_ioc++ % iocs.size()]; }
  std::vector<net::executor_work_guard<net::io_context::executor_type>> work;
  tcp::acceptor acceptor{ioc};
  net::steady_timer backoff{ioc};
  std::chrono::milliseconds backoff_now{0};
  std::vector<std::thread> threads;
  std::atomic<bool> stopping{false};
  std::atomic<size_t> open{0};
  std::atomic<size_t> body_bytes{0}; // of the budget, taken

  // Live sessions, so that stop() can close them.
  std::mutex mtx;
  std::condition_variable all_closed;
  std::map<const void*, std::function<void()>> closers; // guarded by mtx
  std::map<uint64_t, std::function<void()>> idle;       // guarded by mtx
  uint64_t idle_seq = 0;                                // guarded by mtx

  // The TLS context new connections get (null: plaintext); replaced
  // whole when the certificate is reloaded, kept by each connection that
  // took it.
  std::mutex tls_mtx;
  std::shared_ptr<net::ssl::context> tls; // guarded by tls_mtx
  std::shared_ptr<net::ssl::context> current_tls() {
    std::lock_guard<std::mutex> guard{tls_mtx};
    return tls;
  }

  gauge* connections = nullptr;
  gauge* body_bytes_held = nullptr;
  counter* accept_errors = nullptr;
  counter* idle_evictions = nullptr;
  std::vector<counter*> refusals;
};

} // namespace outrider::runtime
