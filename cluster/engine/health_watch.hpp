#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "cluster/engine/engine_info.hpp"

namespace grpc {
class ClientContext;
}

namespace outrider::engine {

/// Watches an engine's health on a thread of its own: opens a Watch stream
/// for service "", reports every status, and on failure reconnects with
/// exponential backoff. The callback runs on that thread; it must only hand
/// the value on (e.g. `caf::anon_send`).
class health_watch {
 public:
  using callback = std::function<void(engine_health, const std::string&)>;

  struct backoff {
    std::chrono::milliseconds initial{100};
    std::chrono::milliseconds max{1000};
  };

  health_watch(std::string endpoint, backoff b, callback cb);
  ~health_watch(); // stops and joins

  health_watch(const health_watch&) = delete;
  health_watch& operator=(const health_watch&) = delete;

  void stop();

 private:
  void run();

  std::string endpoint_;
  backoff backoff_;
  callback cb_;
  std::mutex mtx_;
  std::condition_variable cv_;
  bool stopping_ = false;                     // guarded by mtx_
  std::shared_ptr<grpc::ClientContext> call_; // guarded by mtx_
  std::thread thread_;
};

} // namespace outrider::engine
