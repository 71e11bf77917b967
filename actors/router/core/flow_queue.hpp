#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <list>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace outrider::router {

/// Why a request was turned away before any worker took it (HTTP 429 with
/// `x-outrider-dropped-reason`, gRPC RESOURCE_EXHAUSTED).
enum class shed_reason {
  none,
  saturated,   ///< its priority band's queue is full (--flow-band-cap)
  ttl_expired, ///< it waited past --queue-timeout
};

/// `saturated` or `ttl-expired` (as llm-d's flow control writes them).
constexpr const char* to_string(shed_reason r) {
  switch (r) {
  case shed_reason::saturated:
    return "saturated";
  case shed_reason::ttl_expired:
    return "ttl-expired";
  default:
    return "none";
  }
}

struct flow_config {
  /// Requests waiting in one priority band at most; beyond: saturated.
  size_t band_cap = 5000;
  /// Tokens a flow is credited each round of deficit round robin: a flow
  /// is served in proportion to the (uncached) prompt tokens it sends,
  /// not to its number of requests.
  uint64_t quantum = 4096;
};

/// The waiting line of the router's queue, with flow control: requests
/// wait in priority bands (higher first, strictly), and within a band in
/// flows (one per tenant: the fairness id), served by deficit round robin
/// weighted by each request's cost (its prompt tokens not cached on the
/// best worker). A band holds at most `band_cap` requests. Pure: no clock
/// of its own, no threads; the dispatcher calls it under its lock.
///
/// Deficit round robin: Shreedhar and Varghese, "Efficient fair queueing
/// using deficit round robin" (SIGCOMM 1995), with the new-flow list of
/// FQ-CoDel (RFC 8290, section 4.1), here for one request rather than a
/// quantum: a flow that was idle sends its next request first, so a
/// tenant's occasional request does not wait for a flooding tenant's turn
/// (nor for a burst's first quantum); written here from those
/// descriptions.
class flow_queue {
 public:
  explicit flow_queue(flow_config cfg = {}) : cfg_(cfg) {}

  /// New settings for what comes next: a lowered cap refuses the next
  /// push into a band already at it (those waiting stay), a new quantum
  /// counts from the next round.
  void retune(flow_config cfg) { cfg_ = cfg; }

  struct pushed {
    bool queued = false;
    /// A full band makes room for a flow with fewer waiting: the newest
    /// request of the flow with the most waiting is pushed out (shed,
    /// saturated) instead, so one tenant's flood cannot shed another's
    /// trickle.
    std::optional<uint64_t> evicted;
  };
  /// Adds request `id` of `flow` in `band`; not queued (saturated) when the
  /// band is full and `flow` already has the most waiting there. `cost` is
  /// clamped to at least 1.
  pushed push(uint64_t id, const std::string& flow, int band, uint64_t cost);

  /// The request to serve next, taken out of the line: the highest
  /// non-empty band, and in it the flow whose turn it is. Nullopt: empty.
  std::optional<uint64_t> pop();

  /// Takes a request out wherever it waits (it gave up, expired); false
  /// when it is not waiting here.
  bool remove(uint64_t id);

  size_t size() const { return index_.size(); }
  bool empty() const { return index_.empty(); }
  size_t band_size(int band) const;
  /// Flows with a request waiting, over every band.
  size_t flows() const;

 private:
  struct entry {
    uint64_t id;
    uint64_t cost;
  };
  struct flow_state {
    std::deque<entry> waiting;
    uint64_t deficit = 0;
  };
  struct band_state {
    std::map<std::string, flow_state> flows;
    std::list<std::string> fresh;  // flows that were idle: first, once
    std::list<std::string> active; // round-robin order of the other flows
    size_t size = 0;
  };
  struct where {
    int band;
    std::string flow;
  };

  uint64_t serve(band_state& b, std::list<std::string>& from);
  pushed push_into(band_state& b, uint64_t id, const std::string& flow,
                   int band, uint64_t cost, pushed out);

  flow_config cfg_;
  std::map<int, band_state, std::greater<>> bands_; // highest first
  std::map<uint64_t, where> index_;
};

} // namespace outrider::router
