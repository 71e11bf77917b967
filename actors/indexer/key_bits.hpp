#pragma once

#include <cstdint>

#include "actors/indexer/flat_table.hpp"
#include "actors/indexer/slot_words.hpp"

namespace outrider::indexer {

/// Which slots a key is marked on (slot_words: sparse 64-slot words). The
/// router marks the blocks it predicts on a slot here, so that matching a
/// prompt ANDs them with the index's (prefix_index::find_groups). Not
/// thread-safe.
class key_bits {
 public:
  using words = slot_words;

  void set(uint64_t key, uint32_t slot) {
    bool added = false;
    table_.insert(key, added).set(slot);
  }

  void clear(uint64_t key, uint32_t slot) {
    auto* e = table_.find(key);
    if (!e)
      return;
    e->clear(slot);
    if (e->empty())
      table_.erase(key);
  }

  bool test(uint64_t key, uint32_t slot) const {
    const auto* e = find(key);
    return e && e->test(slot);
  }

  void prefetch(uint64_t key) const { table_.prefetch(key); }

  /// flat_table::tidy.
  bool tidy(size_t budget) { return table_.tidy(budget); }

  /// The key's words; null when no slot marks it.
  const words* find(uint64_t key) const { return table_.find(key); }

 private:
  flat_table<words> table_;
};

} // namespace outrider::indexer
