#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "cluster/kv/kv_event.hpp"

namespace outrider::indexer {

/// Where copies of a block live: a medium, relative to the publisher
/// (locality) and whose tier (ownership, "" = the engine's own), and how
/// many times it was announced there. A GPU copy counts once however often
/// it is re-announced (vLLM's full report mode re-stores prefix hits and
/// removes once); an offload tier's copies are reference-counted, since
/// self-describing chunk events re-announce shared prefixes once per chunk
/// and remove them once per chunk.
/// Each KV cache group of a hybrid model (group_idx, with its spec kind)
/// holds copies of its own under the same hash.
struct residency {
  kv::medium medium = kv::medium::gpu;
  kv::locality locality = kv::locality::unspecified;
  std::string ownership;
  std::optional<uint32_t> group_idx;
  std::string spec_kind;
  uint32_t copies = 0;
  bool same_place(const residency& o) const {
    return medium == o.medium && locality == o.locality &&
           ownership == o.ownership && group_idx == o.group_idx;
  }
};

struct block_info {
  std::optional<uint64_t> parent;
  std::vector<uint32_t> token_ids; // empty: an unresolved offload placeholder
  kv::block_identity identity;
  std::vector<residency> where;
};

/// What applying events did, for metrics.
struct apply_stats {
  size_t stored = 0;
  size_t removed = 0;
  size_t cleared = 0;
  size_t unknown_parent = 0;  // stored anyway: the engine has the block
  size_t unknown_removal = 0; // ignored
  size_t placeholders = 0;    // tokenless stores of hashes not known
};

/// The sidecar's index of one engine's KV cache: per data-parallel rank,
/// every cached block by engine hash, with what makes it distinct (LoRA,
/// extra keys) and where its copies live. Plain class, not thread-safe.
class local_index {
 public:
  using rank_map = std::unordered_map<uint64_t, block_info>;

  apply_stats apply(int rank, const std::vector<kv::kv_event>& events);
  /// `events` without what cannot change the rank: removals of hashes it
  /// does not hold (nor stores earlier in `events`); none when nothing is
  /// left out. Kept out of the store, such events would grow its log
  /// without bound for an index that does not grow (an engine churning
  /// blocks we never saw, or a publisher that removes without storing).
  std::optional<std::vector<kv::kv_event>>
  without_noops(int rank, const std::vector<kv::kv_event>& events,
                size_t* dropped) const;
  void put(int rank, uint64_t hash, block_info info);
  void clear_rank(int rank);
  void clear() { ranks_.clear(); }

  size_t blocks(int rank) const;
  size_t total_blocks() const;
  const std::map<int, rank_map>& ranks() const { return ranks_; }
  /// The rank's blocks as stores (one per copy), each after its parent
  /// when known.
  std::vector<kv::kv_event> snapshot_events(int rank) const;

 private:
  std::map<int, rank_map> ranks_;
};

/// Adds one announced copy to `where` (GPU copies count once).
void add_copy(std::vector<residency>& where, residency place);
/// Drops one; false when no such copy is held.
bool drop_copy(std::vector<residency>& where, const residency& place);

} // namespace outrider::indexer
