#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "actors/router/core/migration.hpp"
#include "actors/router/core/recent_window.hpp"
#include "actors/router/dispatch/dispatch_config.hpp"
#include "actors/router/dispatch/dispatch_queue.hpp"
#include "actors/router/dispatch/engine_calls.hpp"
#include "actors/router/dispatch/prefill_leg.hpp"

namespace outrider::router {

/// What a request's attempts use of the dispatcher, by reference; the
/// dispatcher owns every part and outlives every request.
struct dispatch_parts {
  const dispatch_config& cfg;
  dispatch_stats& stats;
  dispatch_queue& queue;
  engine_calls& calls;
  prefill_leg& prefill;
  recent_window& recent;
  std::atomic<uint64_t>& next_id;
  const std::atomic<bool>& shutting_down;
};

/// The migration loop's seams for one request: placement (a decode worker
/// with disaggregation, any decoding worker when there is no decode pool),
/// the prefill leg, the engine streams, metrics.
std::shared_ptr<attempt_seams> make_attempts(dispatch_parts& parts,
                                             const generate_params& p);

} // namespace outrider::router
