#pragma once

// What the router actor is told: the placement's settings (mode, weights,
// thresholds, tiers, session affinity, search) and its own (the metrics
// cap), and which of them a reload may change.

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "actors/indexer/tiered_index.hpp"
#include "actors/router/core/session_table.hpp"
#include "actors/router/core/worker_selector.hpp"
#include "cluster/engine/vocabulary.hpp"

namespace outrider::router {

struct router_config {
  engine::router_mode mode = engine::router_mode::kv;
  selector_config selector;
  std::string model; // empty: any; else workers must serve this model
  /// Queued prefill tokens above which a rank counts as busy; when every
  /// rank is, requests wait instead of piling on.
  std::optional<double> queue_threshold;
  /// A rank also counts as busy when the prefill blocks queued behind the
  /// prompt it is computing (the oldest routed there) exceed this share of
  /// its KV blocks that no running request holds (engine-reported, else
  /// the worker's total less the router's books): past that, the blocks
  /// admitted ahead of a request queued there evict what it could have
  /// found cached. 0: off (here; --router-queue-kv-share defaults to
  /// 0.01). kv mode only; not for prefill-only placements.
  double queue_kv_share = 0;
  /// kv mode: a request whose chosen rank caches (by the index, not
  /// predicted) at least this share of its prompt gets priority -1, ahead
  /// of the engine's waiting queue, where its prefix would be evicted by
  /// the prompts admitted before it. 0: off (engines need priority
  /// scheduling).
  double priority_overlap = 0;
  /// A prefix just routed counts as cached on its rank until its request is
  /// prefilled and for this long after (until its KV events arrive); and
  /// how many such blocks a rank may hold.
  std::chrono::milliseconds prediction_ttl{5000};
  size_t prediction_cap = 200000;
  /// What a cached block is worth by tier, and whether REMOTE and foreign
  /// copies count (--kv-tier-weights, --kv-credit-remote).
  indexer::tier_policy tiers;
  /// The most engine blocks the index keeps per rank and offload tier (and
  /// on GPU where the worker's record gives no total): a publisher that
  /// never removes (LMCache) cannot grow it past this. 0: no cap.
  size_t slot_block_cap = 1 << 20;
  /// An engine's load report counts for this long (then the books do).
  std::chrono::milliseconds engine_load_fresh{3000};
  /// A shared booking never released is forgotten after this long.
  std::chrono::milliseconds remote_booking_ttl{std::chrono::minutes{30}};
  /// Session affinity (--session-affinity, --session-margin, --session-ttl).
  session_config session;
  /// Score every eligible rank instead of only those that can win: the
  /// reference the pruned search is tested and measured against. Round
  /// robin, random and a temperature score every rank anyway.
  bool exhaustive = false;
  /// The router actor's metrics: the (worker, rank) pairs with series of
  /// their own (--metrics-worker-series-cap); later ones counted as capped.
  size_t worker_series_cap = 4096;
};

/// Copies the settings that may change while running (the selector's
/// weights and temperature, the priority share, the queue threshold and KV
/// share, the prediction TTL) from `from` into `into`.
void take_live_settings(router_config& into, const router_config& from);

/// The settings that differ between `a` and `b` and that `retune` does
/// not take (they need a restart), by option name.
std::vector<std::string> restart_needed(const router_config& a,
                                        const router_config& b);

} // namespace outrider::router
