#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "actors/router/core/migration.hpp"
#include "actors/router/dispatch/dispatch_config.hpp"
#include "actors/router/dispatch/dispatch_queue.hpp"
#include "actors/router/dispatch/engine_calls.hpp"

namespace outrider::router {

/// What the prefill plan is decided on: the prompt, the decode worker `d`
/// and the prefill worker `p` placed for it (its load; what the decode
/// engine reports while fresh, else the router's books).
prefill_facts prefill_facts_of(size_t prompt_tokens, const route_decision& d,
                               const route_decision& p);

/// Conditional disaggregation's first leg: places a prefill worker, asks
/// `plan_prefill` what to do, and runs the prefill call (max_tokens 1) on
/// gRPC's callback API. With an SGLang prefill worker the router picks a
/// bootstrap room instead and both legs go at once.
class prefill_leg {
 public:
  /// The serialised KV session for the decode worker, or nullopt: the
  /// decode worker prefills itself.
  using session_fn = std::function<void(std::optional<std::string>)>;

  prefill_leg(const dispatch_config& cfg, dispatch_queue& queue,
              engine_calls& calls, dispatch_stats& stats)
    : cfg_(cfg), queue_(queue), calls_(calls), stats_(stats) {}

  /// For the decode worker `d`: prefills remotely when the plan says so and
  /// hands `done` the session (with a bootstrap room, as soon as the
  /// prefill leg is sent: SGLang needs both legs at once).
  void run(const std::vector<uint32_t>& tokens,
           const kv::prompt_identity& identity,
           const std::vector<generate_params::media_item>& media,
           const route_decision& d, const trace::trace_context& trace,
           session_fn done);

 private:
  prefill_facts facts(size_t prompt_tokens, const route_decision& d,
                      const route_decision& p);
  static int64_t new_bootstrap_room();

  const dispatch_config& cfg_;
  dispatch_queue& queue_;
  engine_calls& calls_;
  dispatch_stats& stats_;
};

} // namespace outrider::router
