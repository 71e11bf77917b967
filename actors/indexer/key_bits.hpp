#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "actors/indexer/flat_table.hpp"

namespace outrider::indexer {

/// Which slots a key is marked on, as 64-slot bitmask words kept sparse
/// (the non-zero words only, sorted by word index): a key only slot 9,999
/// marks costs one word, not 157, and a key marked within one word (most
/// of them) allocates nothing. The router marks the blocks it predicts on
/// a slot here, so that matching a prompt ANDs them with the index's
/// (prefix_index::find_groups). Not thread-safe.
class key_bits {
 public:
  using word = std::pair<uint32_t, uint64_t>; // (word index, bits)

  /// A key's words, sorted by word index.
  struct words {
    uint32_t n = 0;
    word one{};             // the only word, when n == 1
    std::vector<word> many; // all of them, when n > 1
    const word* data() const { return n <= 1 ? &one : many.data(); }
    size_t size() const { return n; }
    const word& operator[](size_t i) const { return data()[i]; }
  };

  void set(uint64_t key, uint32_t slot) {
    bool added = false;
    auto& e = table_.insert(key, added);
    word w{slot / 64, uint64_t{1} << (slot % 64)};
    if (e.n == 0) {
      e.one = w;
      e.n = 1;
      return;
    }
    if (e.n == 1) {
      if (e.one.first == w.first) {
        e.one.second |= w.second;
        return;
      }
      e.many = {e.one};
    }
    auto i = at(e.many, w.first);
    if (i != e.many.end() && i->first == w.first)
      i->second |= w.second;
    else
      e.many.insert(i, w);
    e.n = static_cast<uint32_t>(e.many.size());
  }

  void clear(uint64_t key, uint32_t slot) {
    auto* e = table_.find(key);
    if (!e)
      return;
    auto w = slot / 64;
    auto bit = uint64_t{1} << (slot % 64);
    if (e->n == 1) {
      if (e->one.first == w && (e->one.second &= ~bit) == 0)
        table_.erase(key);
      return;
    }
    auto i = at(e->many, w);
    if (i == e->many.end() || i->first != w || (i->second &= ~bit) != 0)
      return;
    e->many.erase(i);
    if (e->many.size() == 1) {
      e->one = e->many[0];
      e->many = {};
    }
    e->n = static_cast<uint32_t>(e->n == 2 ? 1 : e->many.size());
  }

  bool test(uint64_t key, uint32_t slot) const {
    const auto* e = find(key);
    if (!e)
      return false;
    auto b =
      std::lower_bound(e->data(), e->data() + e->size(), slot / 64,
                       [](const word& p, uint32_t v) { return p.first < v; });
    return b != e->data() + e->size() && b->first == slot / 64 &&
           (b->second >> (slot % 64) & 1) != 0;
  }

  /// The key's words; null when no slot marks it.
  const words* find(uint64_t key) const { return table_.find(key); }

 private:
  static std::vector<word>::iterator at(std::vector<word>& ws, uint32_t w) {
    return std::lower_bound(
      ws.begin(), ws.end(), w,
      [](const word& p, uint32_t v) { return p.first < v; });
  }
  flat_table<words> table_;
};

} // namespace outrider::indexer
