#pragma once

#include <cstdint>
#include <deque>
#include <string>

#include <nlohmann/json.hpp>

#include "actors/router/core/placement.hpp"
#include "runtime/metrics.hpp"

namespace outrider::router {

/// What each placement gave up, as metrics, a debug log line and the last
/// few decisions for the status page: the overlap of the chosen rank
/// against the best on offer, and what outweighed it. Owned by the router
/// actor (not thread-safe).
class decision_log {
 public:
  explicit decision_log(size_t keep = 40);

  void record(const route_decision& d);
  /// What the engine then served from its cache for a placement (its first
  /// attempt, finished): counted against the overlap the router chose.
  /// Thread-safe (metrics only).
  static void served(const route_decision& d, uint64_t cached_tokens);
  /// The last decisions, newest first.
  nlohmann::json recent() const;

 private:
  struct entry {
    int64_t at_ms = 0; // wall clock
    std::string worker_id;
    int rank = 0;
    uint32_t candidates = 0;
    uint32_t scored = 0; // ranks whose cost was computed
    uint32_t prompt_blocks = 0;
    uint32_t overlap_blocks = 0;
    uint32_t best_overlap_blocks = 0;
    uint64_t queued_prefill_tokens = 0;
    uint64_t best_overlap_prefill_tokens = 0;
  };
  size_t keep_;
  std::deque<entry> entries_;
  runtime::histogram* forgone_ = nullptr;
  runtime::counter* best_ = nullptr;
  runtime::counter* offloaded_blocks_ = nullptr;
  runtime::counter* less_ = nullptr;
  runtime::counter* none_ = nullptr;
  runtime::histogram* queued_ = nullptr;
  runtime::counter* prompt_blocks_ = nullptr;
  runtime::counter* best_blocks_ = nullptr;
  runtime::counter* chosen_blocks_ = nullptr;
};

} // namespace outrider::router
