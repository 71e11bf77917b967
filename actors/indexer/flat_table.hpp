#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace outrider::indexer {

/// An open-addressing hash table (linear probing, backward-shift deletion)
/// from a 64-bit key to a small value, kept in flat arrays so that a lookup
/// touches one or two cache lines. Keys are random-looking hashes; they are
/// used as they are. `MaxLoad` (percent) trades memory for probe length:
/// 70 where lookups are on the decision path, more where memory counts
/// more than a miss's probe. Not thread-safe.
template <class Value, unsigned MaxLoad = 70>
class flat_table {
  static_assert(MaxLoad >= 10 && MaxLoad <= 90);

 public:
  // Nothing is allocated until the first insert: a table per slot of a
  // tier no engine of the fleet publishes costs its members only.
  flat_table() = default;

  size_t size() const { return size_; }

  Value* find(uint64_t key) {
    if (keys_.empty())
      return nullptr;
    for (size_t i = home(key);; i = (i + 1) & mask_) {
      if (state_[i] == empty)
        return nullptr;
      if (state_[i] == full && keys_[i] == key)
        return &vals_[i];
    }
  }

  const Value* find(uint64_t key) const {
    return const_cast<flat_table*>(this)->find(key);
  }

  /// Asks the CPU to bring `key`'s home slot in (its state, key and
  /// value) ahead of a find: a walk that knows its next keys overlaps
  /// their cache misses instead of taking them one after another.
  void prefetch(uint64_t key) const {
    if (keys_.empty())
      return;
    auto i = home(key);
    __builtin_prefetch(&state_[i]);
    __builtin_prefetch(&keys_[i]);
    __builtin_prefetch(&vals_[i]);
  }

  /// The value of `key`, default-constructed when new (`added` tells).
  Value& insert(uint64_t key, bool& added) {
    if ((size_ + 1) * 100 > keys_.size() * MaxLoad)
      rehash(keys_.empty() ? 16 : keys_.size() * 2);
    for (size_t i = home(key);; i = (i + 1) & mask_) {
      if (state_[i] == full && keys_[i] == key) {
        added = false;
        return vals_[i];
      }
      if (state_[i] == empty) {
        state_[i] = full;
        keys_[i] = key;
        vals_[i] = Value{};
        ++size_;
        added = true;
        return vals_[i];
      }
    }
  }

  /// Calls f(key, value) for every entry, in no particular order.
  template <class F>
  void each(F&& f) const {
    for (size_t i = 0; i < keys_.size(); ++i)
      if (state_[i] == full)
        f(keys_[i], vals_[i]);
  }

  /// Removes every entry and gives the memory back.
  void clear() {
    std::vector<uint64_t>{}.swap(keys_);
    std::vector<Value>{}.swap(vals_);
    std::vector<uint8_t>{}.swap(state_);
    mask_ = 0;
    size_ = 0;
  }

  /// Removes `key`, if held. Backward-shift deletion: the entries after
  /// it in its probe run move up, so that no tombstone is left and the
  /// table never rehashes to clear them (a rehash on the decision path was
  /// a latency spike).
  void erase(uint64_t key) {
    if (keys_.empty())
      return;
    size_t i = home(key);
    for (;; i = (i + 1) & mask_) {
      if (state_[i] == empty)
        return;
      if (keys_[i] == key)
        break;
    }
    --size_;
    for (size_t j = (i + 1) & mask_;; j = (j + 1) & mask_) {
      if (state_[j] == empty)
        break;
      // Entry j may fill hole i unless its home lies cyclically in (i, j].
      size_t h = home(keys_[j]);
      bool stays = i <= j ? (i < h && h <= j) : (i < h || h <= j);
      if (stays)
        continue;
      keys_[i] = keys_[j];
      vals_[i] = std::move(vals_[j]);
      i = j;
    }
    state_[i] = empty;
    vals_[i] = Value{}; // what it held goes now
  }

 private:
  static constexpr uint8_t empty = 0;
  static constexpr uint8_t full = 1;

  size_t home(uint64_t key) const {
    // Keys are hashes already; fold the high bits in anyway.
    return static_cast<size_t>((key ^ (key >> 29)) * 0x9e3779b97f4a7c15ULL >>
                               20) &
           mask_;
  }

  void rehash(size_t capacity) {
    std::vector<uint64_t> keys(capacity);
    std::vector<Value> vals(capacity);
    std::vector<uint8_t> state(capacity, empty);
    keys.swap(keys_);
    vals.swap(vals_);
    state.swap(state_);
    mask_ = capacity - 1;
    size_ = 0;
    for (size_t i = 0; i < keys.size(); ++i)
      if (state[i] == full) {
        bool added = false;
        insert(keys[i], added) = std::move(vals[i]);
      }
  }

  std::vector<uint64_t> keys_;
  std::vector<Value> vals_;
  std::vector<uint8_t> state_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

} // namespace outrider::indexer
