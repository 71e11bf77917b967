#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "actors/indexer/chunked_vector.hpp"
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
  /// Asks for the table slot of `key` ahead of a `holds` (a walk down a
  /// prompt in an index of fleet size: each lookup is a cache miss).
  void prefetch(uint64_t key) const { table_.prefetch(key); }
  /// How many blocks ahead such a walk asks (find_groups' too).
  static constexpr size_t walk_ahead = 8;
  /// Per key of `keys`, whether the slot holds it (1) or not (0), into
  /// `out`; the length of the run of leading keys it holds is returned.
  /// One walk that asks ahead, and a block whose holders are its parent's
  /// (a shared prefix held across the fleet) is answered from the one
  /// before without reading its words (slot_words::same).
  uint32_t holds_along(const std::vector<uint64_t>& keys, slot_id slot,
                       std::vector<uint8_t>& out) const;
  /// At most `cap` engine blocks on the slot (0: no cap): past it the
  /// oldest stored go, for publishers that never remove (LMCache).
  void set_cap(slot_id slot, size_t cap);
  /// The slot will likely hold about `blocks` (its engine's cache): its
  /// table is made that size at its first block, and again after a clear,
  /// instead of growing its way there. A fleet's ranks fill in step, and
  /// 10,000 small tables growing in the same second held the router's
  /// actor up to 140 ms (docs/benchmarks.md). The caller bounds it.
  void expect(slot_id slot, size_t blocks);
  counters& mutable_stats() { return stats_; }
  /// Forgets everything a slot holds (worker gone, or all cleared).
  void clear_slot(slot_id slot);
  /// flat_table::tidy on every table: growths and moves left pending by
  /// events that stopped. Whether work is left.
  bool tidy(size_t budget);

  /// Per slot holding at least the first block, its run of leading blocks
  /// of `seq_hashes`, in no particular order; slots holding none are absent.
  std::vector<overlap>
  find_matches(const std::vector<uint64_t>& seq_hashes) const;
  /// The same answer grouped by run length (match_groups): its cost
  /// follows the prompt's length and the 64-slot words still matching at
  /// each depth, not the number of holders (prefix_match.cpp). With
  /// `also`, a slot's run goes on through blocks held here or marked for
  /// it there (the router's predicted blocks), either.
  match_groups find_groups(const std::vector<uint64_t>& seq_hashes,
                           const key_bits* also = nullptr) const;

  /// The engine block hashes a slot holds, sorted.
  std::vector<uint64_t> engine_hashes(slot_id slot) const;
  /// How many engine blocks a slot holds.
  size_t held(slot_id slot) const {
    return slot < slots_.size() ? slots_[slot].size() : 0;
  }
  /// Slots allocated in a slot's own table (tests).
  size_t table_slots(slot_id slot) const {
    return slot < slots_.size() ? slots_[slot].map.capacity() : 0;
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
  // Per distinct block: the slots holding it, as 64-slot bit words. One
  // word inline in the table (`w`, `bits`: at most 64 slots, as in most
  // fleets, match by AND within this flat table), the others as sparse
  // words (slot_words) in an entry of `entries_`, made only for blocks
  // held in more than one word (entry 0: none). The inline word's index
  // is the first holder's and stays while any slot of it or the entry
  // holds the block: the entry never has word `w`. At 10,000 workers a
  // block few slots of one word hold costs no entry (32 bytes and more;
  // before, every block a slot from 64 up held had one).
  struct block_ref {
    uint64_t bits = 0;
    uint32_t w = 0;
    uint32_t entry = 0;
  };
  flat_table<block_ref> table_;
  chunked_vector<slot_words> entries_ = chunked_vector<slot_words>(1);
  std::vector<uint32_t> free_entries_;
  // Engines may hold the same tokens under several hashes (salts,
  // duplicates): a slot keeps the block until the last goes. The bit says
  // one; the rare further copies are counted here, by (key, slot).
  std::map<std::pair<uint64_t, slot_id>, uint32_t> extra_holds_;
  // Per slot: engine hash -> its key, copies and when it was stored (the
  // order a cap evicts in), in a flat table loaded up to 80%: this is the
  // one structure with an entry per (slot, block), so its bytes are the
  // index's bytes (24 a slot of the table).
  struct held_block {
    uint64_t key = 0;
    uint32_t copies = 0;
    uint32_t stamp = 0;
  };
  struct slot_blocks {
    flat_table<held_block, 80> map;
    // (engine hash, stamp) in store order; entries whose stamp is stale
    // were removed or stored again since. Kept only while a slot is at its
    // cap (a publisher that never removes); built from the stamps when it
    // gets there, released when it is well under it again: a slot whose
    // engine removes what it evicts pays nothing for its cap.
    using store_order = std::deque<std::pair<uint64_t, uint32_t>>;
    std::unique_ptr<store_order> order;
    uint32_t next_stamp = 0;
    size_t cap = 0;
    size_t expect = 0;
    size_t size() const { return map.size(); }

    slot_blocks() = default;
    slot_blocks(const slot_blocks& o)
      : map(o.map),
        order(o.order ? std::make_unique<store_order>(*o.order) : nullptr),
        next_stamp(o.next_stamp), cap(o.cap), expect(o.expect) {}
    slot_blocks& operator=(const slot_blocks& o) {
      if (this != &o)
        *this = slot_blocks(o);
      return *this;
    }
    slot_blocks(slot_blocks&&) noexcept = default;
    slot_blocks& operator=(slot_blocks&&) noexcept = default;
  };
  std::vector<slot_blocks> slots_;
  size_t entries_count_ = 0;
  counters stats_;
};

} // namespace outrider::indexer
