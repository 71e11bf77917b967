#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "cluster/engine/engine_info.hpp"

namespace grpc {
class Alarm;
class Channel;
} // namespace grpc

namespace outrider::engine {

/// Watches an engine's health on gRPC's callback API (no thread of its
/// own): opens a Watch stream for service "", reports every status, and on
/// failure reports `unreachable` once and reconnects with exponential
/// backoff. The callback runs on gRPC's threads; it must only hand the
/// value on (e.g. `caf::anon_send`). For SGLang (`source::sglang_state`)
/// the stream is WatchEngineState instead, whose snapshots also say pause
/// (SGLang's standard health stays SERVING while paused): serving when
/// healthy, up and not paused, else not_serving.
class health_watch {
 public:
  using callback = std::function<void(engine_health, const std::string&)>;
  enum class source { grpc_health, sglang_state };

  struct backoff {
    std::chrono::milliseconds initial{100};
    std::chrono::milliseconds max{1000};
    // How long one connection attempt may take to finish the HTTP/2
    // handshake: a busy engine answers late, and is not down for it.
    std::chrono::milliseconds connect{5000};
  };

  health_watch(std::string endpoint, backoff b, callback cb,
               source src = source::grpc_health);
  ~health_watch(); // stops, and waits until no callback can run

  health_watch(const health_watch&) = delete;
  health_watch& operator=(const health_watch&) = delete;

  void stop();

 private:
  class call_base;
  class call;
  class state_call;
  void open();                         // a new Watch call
  void closed(const std::string& why); // it ended
  void status(engine_health h);        // it reported

  std::string endpoint_;
  backoff backoff_;
  callback cb_;
  std::shared_ptr<grpc::Channel> channel_;
  source source_;
  std::shared_ptr<void> stub_; // the generated stub, kept out of this header
  std::mutex mtx_;
  std::condition_variable idle_;
  bool stopping_ = false;              // guarded by mtx_
  call_base* call_ = nullptr;          // guarded by mtx_
  std::unique_ptr<grpc::Alarm> alarm_; // guarded by mtx_
  bool waiting_ = false;               // an alarm is set; guarded by mtx_
  bool reported_down_ = false;         // guarded by mtx_
  std::chrono::milliseconds delay_;    // guarded by mtx_
};

} // namespace outrider::engine
