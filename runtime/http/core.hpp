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

  std::string name;
  http_server::async_handler handler;
  http_limits lim;
  net::io_context ioc;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  tcp::acceptor acceptor{ioc};
  net::steady_timer backoff{ioc};
  std::chrono::milliseconds backoff_now{0};
  std::vector<std::thread> threads;
  std::atomic<bool> stopping{false};
  std::atomic<size_t> open{0};

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
  counter* accept_errors = nullptr;
  counter* idle_evictions = nullptr;
  std::vector<counter*> refusals;
};

} // namespace outrider::runtime
