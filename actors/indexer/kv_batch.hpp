#pragma once

// A batch of KV events as the sidecar's indexer applies it, and who hears
// of it: value types, no actor behind them.

#include <cstdint>
#include <vector>

#include "cluster/kv/kv_event.hpp"

namespace outrider::indexer {

/// One batch of a rank's KV events, in sequence.
struct kv_batch {
  int rank = 0;
  uint64_t seq = 0;
  std::vector<kv::kv_event> events;
  /// The sidecar's event-plane position: 1, 2, ... over every rank, set by
  /// the event hub (0 elsewhere).
  uint64_t position = 0;
  /// When the event hub numbered it (ns since the Unix epoch; 0 for a
  /// snapshot's batches): routers measure the event plane's lag from it.
  uint64_t unix_nanos = 0;
};

/// Receives everything the indexer applied, in order (the event plane to
/// routers). Called on the indexer's thread; must not block.
class kv_listener {
 public:
  virtual ~kv_listener() = default;
  virtual void on_batch(const kv_batch& b) = 0;
};

} // namespace outrider::indexer
