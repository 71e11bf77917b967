#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "actors/router/brain/kv_router.hpp"
#include "actors/router/dispatch/dispatch_config.hpp"
#include "runtime/actor_slot.hpp"

namespace outrider::router {

/// Placement through the router actor, with no thread per request: one
/// short-lived actor per placement asks the router actor's current
/// incarnation, waits out its restarts (up to 3 s, also while no worker is
/// known yet) and, when asked to queue, waits in line while every worker is
/// busy: one line per role asked for, only its head asking again, woken
/// when a booking shrinks. The line is flow-controlled (`flow_queue`):
/// priority bands, flows served by deficit round robin on the prompt tokens
/// the best worker would still compute, a cap per band (beyond it the
/// request is shed, `saturated`) and a time limit (`ttl-expired`).
class dispatch_queue {
 public:
  using placed_fn = std::function<void(route_decision)>;

  dispatch_queue(caf::actor_system& sys,
                 runtime::slot_ptr<kv_router_actor> router,
                 runtime::gauge& queue_depth, flow_config flow = {},
                 std::chrono::milliseconds queue_timeout = std::chrono::seconds{
                   60});
  dispatch_queue(const dispatch_queue&) = delete;
  dispatch_queue& operator=(const dispatch_queue&) = delete;

  /// Asks for a rank; `done` gets the decision once.
  void place(std::shared_ptr<const route_request> req, bool queue,
             placed_fn done);
  /// A booking shrank (the prompt is computed) or went (`finished`): tells
  /// the router actor and wakes the first of every line.
  void unbook(uint64_t key, bool finished);
  /// New flow-control settings (a reload): a lowered band cap holds for
  /// the next request to join a line (none waiting is shed for it), the
  /// quantum for the next rounds, the time limit for requests that start
  /// waiting from now.
  void retune(flow_config flow, std::chrono::milliseconds queue_timeout);
  flow_config flow() const;
  std::chrono::milliseconds queue_timeout() const {
    return std::chrono::milliseconds{queue_timeout_ms_.load()};
  }
  /// No more waiting in line: everyone waiting is answered now.
  void begin_shutdown();
  /// No more waiting for a router restart either (everything is cancelled).
  void cut() {
    cut_ = true;
    shutting_down_ = true;
  }

 private:
  struct job;
  struct line {
    flow_queue waiting;
    std::map<uint64_t, std::shared_ptr<job>> jobs; // those in `waiting`
    std::shared_ptr<job> head;                     // the one asking; null: none
  };
  enum class joined { head, waiting, saturated };
  void place_once(caf::event_based_actor* self, const std::shared_ptr<job>& j);
  void placed(caf::event_based_actor* self, const std::shared_ptr<job>& j,
              uint64_t generation, route_decision d, bool down);
  void answer(caf::event_based_actor* self, const std::shared_ptr<job>& j,
              route_decision d);
  void shed(caf::event_based_actor* self, const std::shared_ptr<job>& j,
            shed_reason why);
  void shed_soon(caf::event_based_actor* self, const std::shared_ptr<job>& j,
                 shed_reason why);
  joined join_line(const std::shared_ptr<job>& j, uint64_t cost);
  void leave_line(const std::shared_ptr<job>& j);
  bool leave_waiting(const std::shared_ptr<job>& j); // true: it was waiting
  void retry_later(caf::event_based_actor* self, const std::shared_ptr<job>& j,
                   std::chrono::milliseconds after);

  caf::actor_system& sys_;
  runtime::slot_ptr<kv_router_actor> router_; // the current incarnation
  runtime::gauge& queue_depth_;
  flow_config flow_; // mtx_
  std::atomic<int64_t> queue_timeout_ms_;
  std::atomic<uint64_t> next_job_{0};
  std::atomic<bool> shutting_down_{false};
  std::atomic<bool> cut_{false};
  // The router actor's generation that last placed a request.
  std::atomic<uint64_t> placed_generation_{0};
  mutable std::mutex mtx_;
  // One line per role asked for (none: any worker that decodes); mtx_.
  std::map<std::optional<engine::worker_role>, line> lines_;
};

} // namespace outrider::router
