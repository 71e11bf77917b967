#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <unordered_map>
#include <utility>
#include <vector>

#include "actors/indexer/local_index.hpp"
#include "cluster/kv/kv_event.hpp"

namespace outrider::indexer {

/// Holds each rank's offload tiers (every medium but GPU) to at most `cap`
/// blocks, oldest first. A store-only publisher (LMCache's connector sends
/// no removals, docs/wire.md) would otherwise grow the sidecar's index,
/// its RocksDB log and every router's copy without end. The GPU tier is
/// left to the engine, which removes what it evicts.
///
/// Before a batch is applied, `evictions` names the removals to append so
/// that the tier is back within `cap` once both are applied (a batch that
/// alone stores more than `cap` new blocks leaves the excess until the
/// next); after, `note` learns the order blocks arrived in (a block
/// announced again counts as new: in use again). The removals
/// travel with the batch: logged, applied and forwarded as the engine's
/// own, so the store, the index and the routers agree. After a restart the
/// recovered blocks are taken as older than any new one, in no particular
/// order among themselves.
class tier_bound {
 public:
  explicit tier_bound(size_t cap) : cap_(cap) {}

  std::vector<kv::kv_event> evictions(const local_index& index, int rank,
                                      const std::vector<kv::kv_event>& events);
  void note(const local_index& index, int rank,
            const std::vector<kv::kv_event>& events);
  /// Takes a rank's offload copies as they are (after recovery or reset).
  void rebuild(const local_index& index, int rank);
  /// Blocks `rank` holds in `medium` as counted here.
  size_t held(int rank, kv::medium medium) const;
  /// Arrival entries kept for it (live and stale): bounded by what it holds.
  size_t order_entries(int rank, kv::medium medium) const;

 private:
  struct tier {
    std::unordered_map<uint64_t, uint64_t> stamp;    // block -> its arrival
    std::deque<std::pair<uint64_t, uint64_t>> order; // (block, arrival)
  };
  using key = std::pair<int, kv::medium>;
  void sync(const local_index& index, int rank, uint64_t hash,
            kv::medium medium, bool stored);
  void compact(tier& t);

  size_t cap_;
  uint64_t clock_ = 0;
  std::map<key, tier> tiers_;
};

} // namespace outrider::indexer
