#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/router/brain/kv_router.hpp"
#include "actors/router/core/migration.hpp"
#include "actors/router/core/recent_window.hpp"
#include "actors/router/dispatch/dispatch_attempts.hpp"
#include "actors/router/dispatch/dispatch_config.hpp"
#include "actors/router/dispatch/dispatch_queue.hpp"
#include "actors/router/dispatch/engine_calls.hpp"
#include "actors/router/dispatch/prefill_leg.hpp"
#include "runtime/actor_slot.hpp"
#include "runtime/metrics.hpp"

namespace outrider::router {

/// Sends requests where the router says, with no thread per request: the
/// router actor picks a rank (asked from a short-lived actor per placement,
/// which also waits out a router restart and queues while every worker is
/// busy), and `Generate` streams on gRPC's callback API from the worker's
/// relay (OpenEngine) or, with `--dispatch direct`, from its engine
/// (OpenEngine or vLLM); prefill and completion are reported back for load
/// tracking. A stream that breaks (UNAVAILABLE) is migrated: the tokens so
/// far are appended to the prompt and the request continues on another
/// worker, up to `migration_limit` times; the caller sees one contiguous
/// stream. With conditional disaggregation a request goes to a decode
/// worker, prefilled first on a prefill worker when the policy says so (the
/// KV session travels along).
///
/// Its parts, each in a file of its own: the `dispatch_queue` (placement
/// through the router actor), the `engine_calls` (channels, calls in
/// flight, aborts), the `prefill_leg` (with the pure `plan_prefill`), and
/// per request the attempts (`dispatch_attempts.cpp`) that the migration
/// loop drives.
class dispatcher {
 public:
  dispatcher(caf::actor_system& sys, runtime::slot_ptr<kv_router_actor> router,
             dispatch_config cfg = {});
  /// Ends what is still in flight (see `cancel_all`).
  ~dispatcher();
  dispatcher(const dispatcher&) = delete;
  dispatcher& operator=(const dispatcher&) = delete;

  /// Starts a request and returns at once. `on_tokens` gets each chunk of
  /// new tokens, on gRPC's threads, one call at a time; returning false
  /// cancels (the engine request is aborted). `done` gets the outcome, once.
  void generate(generate_params p, token_sink on_tokens,
                std::function<void(generate_outcome)> done);
  /// The same, waiting for the outcome (the demo workload, tools).
  generate_outcome generate_blocking(const generate_params& p,
                                     token_sink on_tokens);

  /// From now on a broken stream is not migrated and nothing waits in the
  /// queue for a free worker (the router is shutting down): every request
  /// waiting in line is answered now.
  void begin_shutdown();
  bool shutting_down() const { return shutting_down_.load(); }
  /// Ends every request in flight now: their engine calls are cancelled and
  /// they finish with 503 "the router is shutting down"; so does anything
  /// started later. Waits up to `wait` for them to have ended.
  void cancel_all(std::chrono::milliseconds wait);
  /// Requests started and not yet done.
  size_t in_flight() const { return active_.load(); }
  /// Placement through the router actor, flow-controlled: the endpoint
  /// picker places with it and sends nothing itself.
  dispatch_queue& queue() { return queue_; }
  /// Requests finished over the last minute (the status page).
  const recent_window& recent() const { return recent_; }

 private:
  const dispatch_config cfg_;
  dispatch_stats stats_ = dispatch_stats::make();
  recent_window recent_;
  std::atomic<uint64_t> next_id_{0};
  std::atomic<bool> shutting_down_{false};
  std::atomic<size_t> active_{0};
  engine_calls calls_;
  dispatch_queue queue_;
  prefill_leg prefill_;
  dispatch_parts parts_;
};

} // namespace outrider::router
