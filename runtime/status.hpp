#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "runtime/http/server.hpp"
#include "runtime/metrics.hpp"
#include "runtime/worker_pool.hpp"

namespace outrider::runtime {

/// What the process reports about itself: readiness and each component's
/// state. Thread-safe; written by actors, read by the status server.
class health_state {
 public:
  explicit health_state(std::string role);

  /// The role declares itself ready (or not). Ignored once shutting down.
  void set_ready(bool ready);
  /// Readiness goes false for good; called at the first moment of shutdown.
  void begin_shutdown();
  bool ready() const {
    return ready_.load() && !shutting_down_.load() && impaired_.load() == 0;
  }
  bool shutting_down() const { return shutting_down_.load(); }

  /// Records a component's state, e.g. ("engine", "serving", "").
  void set_component(const std::string& name, const std::string& state,
                     const std::string& detail = {});

  /// A part the process cannot serve without (a listener that stopped
  /// accepting, say) fails or recovers: not ready while any is failing,
  /// whatever the role declared.
  void set_impaired(const std::string& part, bool impaired);

  /// The `/health` document.
  std::string to_json() const;

 private:
  struct component {
    std::string state;
    std::string detail;
  };
  std::string role_;
  std::atomic<bool> ready_{false};
  std::atomic<bool> shutting_down_{false};
  std::atomic<int> impaired_{0};
  mutable std::mutex mtx_;
  std::set<std::string> impaired_parts_;        // guarded by mtx_
  std::map<std::string, component> components_; // guarded by mtx_
};

/// An added route that answers later: it must not block, and calls
/// `respond` once, from any thread (dropping it unanswered answers 500).
using async_route_handler = std::function<void(
  const http_request&, std::function<void(http_response)> respond)>;

/// The status server: `/live`, `/ready`, `/health`, `/metrics`, answered
/// on its own I/O thread; added routes (debugging) either answer
/// asynchronously (asks to actors: nothing waits) or run on a separate
/// worker, so that a slow one never delays a probe.
class status_server {
 public:
  status_server(std::shared_ptr<health_state> health,
                metrics_registry& metrics);

  /// Starts listening (`bind_failed` when it cannot).
  caf::error start(const std::string& host, uint16_t port);
  uint16_t port() const { return http_.port(); }
  void stop();
  /// Ends the worker that runs added routes (they answer 503 from now on);
  /// called before the actor system goes, since they may talk to actors.
  void stop_added_routes() {
    async_->stopped = true;
    slow_.stop();
  }

  /// Serves `path` with `h` as well (any time, from any thread). The
  /// handler runs on the status server's worker thread (one; a few
  /// requests wait, more get 503). Only GET and HEAD reach it, unless
  /// `any_method`.
  void add_route(const std::string& path,
                 std::function<http_response(const http_request&)> h,
                 bool any_method = false);

  /// Serves `path` with `h`, which answers asynchronously on its own (an
  /// ask to an actor); at most `max_async` of them are in flight, more get
  /// 503. Same methods as `add_route`.
  void add_async_route(const std::string& path, async_route_handler h,
                       bool any_method = false);

  /// Routes one request (added routes inline, asynchronous ones waited
  /// for); public for unit tests.
  http_response handle(const http_request& req);

  static constexpr int max_async = 64;

 private:
  struct route {
    std::function<http_response(const http_request&)> sync;
    async_route_handler async;
    bool any_method = false;
    explicit operator bool() const { return sync || async; }
  };
  void serve(std::shared_ptr<http_exchange> ex);
  route route_of(const std::string& path);
  // The answer of a built-in path, or of a method an added route refuses;
  // nullopt: the added route answers.
  std::optional<http_response> answer_here(const http_request& req,
                                           const route& extra);

  std::shared_ptr<health_state> health_;
  metrics_registry& metrics_;
  counter& requests_;
  std::mutex routes_mtx_;
  std::map<std::string, route> routes_; // guarded by routes_mtx_
  worker_pool slow_{1, 8};
  // Asynchronous answers in flight; shared with them (they may outlive a
  // stopping server).
  struct async_state {
    std::atomic<int> in_flight{0};
    std::atomic<bool> stopped{false};
  };
  std::shared_ptr<async_state> async_ = std::make_shared<async_state>();
  http_server http_;
};

} // namespace outrider::runtime
