#pragma once

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

namespace outrider::indexer {

/// Which slots a key is marked on, as bitmask words kept sparse ((word
/// index, bits) for the non-zero words only, sorted): a key only slot 9,999
/// marks costs one word, not 157. The router marks the blocks it predicts
/// on a slot here, so that matching a prompt ANDs them with the index's
/// (prefix_index::find_groups). Not thread-safe.
class key_bits {
  // The first of `ws` at or after word `w`.
  template <typename Words>
  static auto at(Words& ws, uint32_t w) {
    return std::lower_bound(ws.begin(), ws.end(), w,
                            [](const std::pair<uint32_t, uint64_t>& p,
                               uint32_t v) { return p.first < v; });
  }

 public:
  using words = std::vector<std::pair<uint32_t, uint64_t>>;

  void set(uint64_t key, uint32_t slot) {
    auto& ws = bits_[key];
    auto i = at(ws, slot / 64);
    if (i == ws.end() || i->first != slot / 64)
      i = ws.insert(i, {slot / 64, 0});
    i->second |= uint64_t{1} << (slot % 64);
  }
  void clear(uint64_t key, uint32_t slot) {
    auto k = bits_.find(key);
    if (k == bits_.end())
      return;
    auto& ws = k->second;
    auto i = at(ws, slot / 64);
    if (i == ws.end() || i->first != slot / 64)
      return;
    i->second &= ~(uint64_t{1} << (slot % 64));
    if (i->second == 0)
      ws.erase(i);
    if (ws.empty())
      bits_.erase(k);
  }
  bool test(uint64_t key, uint32_t slot) const {
    return word(find(key), slot / 64) >> (slot % 64) & 1;
  }
  /// The key's words; null when no slot marks it.
  const words* find(uint64_t key) const {
    auto k = bits_.find(key);
    return k == bits_.end() ? nullptr : &k->second;
  }
  /// Word `w` of a key's words (0 when absent).
  static uint64_t word(const words* ws, uint32_t w) {
    if (!ws)
      return 0;
    auto i = at(*ws, w);
    return i != ws->end() && i->first == w ? i->second : 0;
  }
  size_t keys() const { return bits_.size(); }

 private:
  std::unordered_map<uint64_t, words> bits_;
};

} // namespace outrider::indexer
