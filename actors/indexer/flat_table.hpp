#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace outrider::indexer {

/// An open-addressing hash table (linear probing, tombstones) from a 64-bit
/// key to a small value, kept in flat arrays so that a lookup touches one or
/// two cache lines. Keys are random-looking hashes; they are used as they
/// are. Not thread-safe.
template <class Value>
class flat_table {
 public:
  flat_table() { rehash(16); }

  size_t size() const { return size_; }

  Value* find(uint64_t key) {
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

  /// The value of `key`, default-constructed when new (`added` tells).
  Value& insert(uint64_t key, bool& added) {
    if ((size_ + tombstones_ + 1) * 10 > keys_.size() * 7)
      rehash(size_ * 10 > keys_.size() * 3 ? keys_.size() * 2 : keys_.size());
    size_t tomb = SIZE_MAX;
    for (size_t i = home(key);; i = (i + 1) & mask_) {
      if (state_[i] == full && keys_[i] == key) {
        added = false;
        return vals_[i];
      }
      if (state_[i] == tombstone && tomb == SIZE_MAX)
        tomb = i;
      if (state_[i] == empty) {
        if (tomb != SIZE_MAX) {
          i = tomb;
          --tombstones_;
        }
        state_[i] = full;
        keys_[i] = key;
        vals_[i] = Value{};
        ++size_;
        added = true;
        return vals_[i];
      }
    }
  }

  void erase(uint64_t key) {
    for (size_t i = home(key);; i = (i + 1) & mask_) {
      if (state_[i] == empty)
        return;
      if (state_[i] == full && keys_[i] == key) {
        state_[i] = tombstone;
        --size_;
        ++tombstones_;
        return;
      }
    }
  }

 private:
  static constexpr uint8_t empty = 0;
  static constexpr uint8_t full = 1;
  static constexpr uint8_t tombstone = 2;

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
    tombstones_ = 0;
    for (size_t i = 0; i < keys.size(); ++i)
      if (state[i] == full) {
        bool added = false;
        insert(keys[i], added) = vals[i];
      }
  }

  std::vector<uint64_t> keys_;
  std::vector<Value> vals_;
  std::vector<uint8_t> state_;
  size_t mask_ = 0;
  size_t size_ = 0;
  size_t tombstones_ = 0;
};

} // namespace outrider::indexer
