#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <unordered_map>
#include <vector>

#include "cluster/kv/kv_event.hpp"

namespace outrider::indexer {

struct block_info {
  std::optional<uint64_t> parent;
  std::vector<uint32_t> token_ids;
};

/// What applying events did, for metrics.
struct apply_stats {
  size_t stored = 0;
  size_t removed = 0;
  size_t cleared = 0;
  size_t unknown_parent = 0;  // stored anyway: the engine has the block
  size_t unknown_removal = 0; // ignored
};

/// The sidecar's index of one engine's KV cache: per data-parallel rank,
/// every cached block by engine hash. Plain class, not thread-safe.
class local_index {
 public:
  using rank_map = std::unordered_map<uint64_t, block_info>;

  apply_stats apply(int rank, const std::vector<kv::kv_event>& events);
  void put(int rank, uint64_t hash, block_info info);
  void clear_rank(int rank);
  void clear() { ranks_.clear(); }

  size_t blocks(int rank) const;
  size_t total_blocks() const;
  const std::map<int, rank_map>& ranks() const { return ranks_; }
  /// The rank's blocks as stores, each after its parent when known.
  std::vector<kv::kv_event> snapshot_events(int rank) const;

 private:
  std::map<int, rank_map> ranks_;
};

} // namespace outrider::indexer
