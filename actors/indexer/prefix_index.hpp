#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <unordered_map>
#include <vector>

#include "actors/indexer/flat_table.hpp"
#include "actors/indexer/key_bits.hpp"
#include "actors/indexer/match_groups.hpp"
#include "actors/indexer/slot_words.hpp"
#include "cluster/kv/kv_event.hpp"

namespace outrider::indexer {

/// One (worker, data-parallel rank) in the router's index.
using slot_id = uint32_t;

/// How many leading blocks of a prompt a slot holds.
struct overlap {
  slot_id slot = 0;
  uint32_t blocks = 0;
};

/// The router's global KV index of one tier: which slots hold which prefix
/// blocks, keyed by the router's own block key (docs/wire.md, "The block
/// hash"), recomputed from the token ids and identity (LoRA, extra keys) of
/// each stored block. Engine hashes are kept per slot only to find parents
/// and removals. Plain class, not thread-safe.
class prefix_index {
 public:
  struct counters {
    uint64_t stored = 0;
    uint64_t removed = 0;
    uint64_t cleared = 0;
    uint64_t unknown_parent = 0;  // blocks skipped: no way to chain them
    uint64_t unknown_removal = 0; // removals of blocks never seen
    uint64_t evicted = 0;         // dropped oldest first past a slot's cap
  };

  /// `counted`: a block announced n times stays until removed n times (an
  /// offload tier's chunk events); else a re-announced block counts once.
  explicit prefix_index(uint64_t seed, bool counted = false);

  /// Applies one batch of a slot's engine events, all taken as this
  /// tier's. With `touched`, the keys of the blocks it stored or removed
  /// are appended there.
  void apply(slot_id slot, const std::vector<kv::kv_event>& events,
             std::vector<uint64_t>* touched = nullptr);

  /// The primitives `apply` is made of (tiered_index uses them across
  /// tiers). The key a slot's engine hash stands for, if held.
  std::optional<uint64_t> key_of(slot_id slot, uint64_t engine_hash) const;
  /// Holds `engine_hash` as `key` on the slot (one more copy if counted).
  void put(slot_id slot, uint64_t engine_hash, uint64_t key,
           std::vector<uint64_t>* touched = nullptr);
  /// One copy fewer; false when the slot does not hold it.
  bool drop(slot_id slot, uint64_t engine_hash,
            std::vector<uint64_t>* touched = nullptr);
  /// Whether the slot holds a block of this key.
  bool holds(uint64_t key, slot_id slot) const;
  /// At most `cap` engine blocks on the slot (0: no cap): past it the
  /// oldest stored go, for publishers that never remove (LMCache).
  void set_cap(slot_id slot, size_t cap);
  counters& mutable_stats() { return stats_; }
  /// Forgets everything a slot holds (worker gone, or all cleared).
  void clear_slot(slot_id slot);

  /// Per slot holding at least the first block, its run of leading blocks
  /// of `seq_hashes`, in no particular order; slots holding none are absent.
  std::vector<overlap>
  find_matches(const std::vector<uint64_t>& seq_hashes) const;
  /// The same answer grouped by run length (match_groups): its cost
  /// follows the prompt's length and the 64-slot words still matching at
  /// each depth, not the number of holders (prefix_match.cpp). With
  /// `also`, a slot's run is the longer of its run here and its run of
  /// keys marked there (the router's predicted blocks).
  match_groups find_groups(const std::vector<uint64_t>& seq_hashes,
                           const key_bits* also = nullptr) const;

  /// The engine block hashes a slot holds, sorted.
  std::vector<uint64_t> engine_hashes(slot_id slot) const;
  /// How many engine blocks a slot holds.
  size_t held(slot_id slot) const {
    return slot < slots_.size() ? slots_[slot].size() : 0;
  }
  /// (slot, block) entries held.
  size_t entries() const { return entries_count_; }
  /// Distinct blocks in the index.
  size_t distinct_blocks() const { return table_.size(); }
  const counters& stats() const { return stats_; }

 private:
  void add_holder(uint64_t seq, slot_id slot);
  void drop_holder(uint64_t seq, slot_id slot);
  void enforce_cap(slot_id slot);

  uint64_t seed_;
  bool counted_ = false;
  // Per distinct block: (slot, how many of the slot's engine blocks map to
  // it), sorted by slot. Engines may hold the same tokens under several
  // hashes (salts, duplicates): the slot keeps the block until the last goes.
  // The slots beyond the first 64 as sparse bitmask words (slot_words): a
  // block one high slot holds costs one word, not one per 64 slots below.
  using holder = std::pair<slot_id, uint32_t>;
  struct block_entry {
    std::vector<holder> holders;
    slot_words hi;
  };
  // Sequence hash -> the first 64 slots as a bitmask (matching by AND stays
  // in this flat table) and the block's entry.
  struct block_ref {
    uint64_t mask0 = 0;
    uint32_t entry = 0;
  };
  flat_table<block_ref> table_;
  std::vector<block_entry> entries_;
  std::vector<uint32_t> free_entries_;
  // Per slot: engine hash -> its key, copies and when it was stored (the
  // order a cap evicts in).
  struct held_block {
    uint64_t key = 0;
    uint32_t copies = 0;
    uint32_t stamp = 0;
  };
  struct slot_blocks {
    std::unordered_map<uint64_t, held_block> map;
    // (engine hash, stamp) in store order; entries whose stamp is stale
    // were removed or stored again since. Kept only under a cap.
    std::deque<std::pair<uint64_t, uint32_t>> order;
    uint32_t next_stamp = 0;
    size_t cap = 0;
    size_t size() const { return map.size(); }
  };
  std::vector<slot_blocks> slots_;
  size_t entries_count_ = 0;
  counters stats_;
};

} // namespace outrider::indexer
