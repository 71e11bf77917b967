#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "actors/router/dispatcher.hpp"
#include "runtime/http_server.hpp"

namespace outrider::router {

/// The OpenAI-compatible HTTP frontend: `POST /v1/completions` with
/// token-id prompts (streaming as server-sent events ending in
/// `data: [DONE]`), `GET /v1/models`. One thread per connection (bounded);
/// a client that goes away mid-stream cancels the request on the engine.
class http_frontend {
 public:
  /// `models`: the names to list and accept (empty: accept any).
  http_frontend(dispatcher& d, std::function<std::vector<std::string>()> models,
                size_t max_connections = 1024);
  ~http_frontend();

  std::string start(const std::string& host, uint16_t port);
  uint16_t port() const { return port_; }
  void stop();

 private:
  void accept_loop();
  void serve(int fd);

  dispatcher& dispatcher_;
  std::function<std::vector<std::string>()> models_;
  size_t max_connections_;
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;
  std::mutex mtx_;
  std::condition_variable idle_;
  std::set<int> open_fds_; // one per connection thread; guarded by mtx_
};

} // namespace outrider::router
