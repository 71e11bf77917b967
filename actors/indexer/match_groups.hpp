#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace outrider::indexer {

/// The slots that hold a prompt's leading blocks, grouped by how many they
/// hold, in a form whose size follows the groups rather than the holders:
/// each group is a bitmask over slot ids, kept as (word index, bits) for
/// its non-zero 64-slot words only. A prompt every one of 10,000 slots
/// holds the start of makes one group of 157 words, not 10,000 entries.
struct match_groups {
  struct group {
    uint32_t blocks = 0; // leading blocks each member holds
    size_t count = 0;    // members
    std::vector<std::pair<uint32_t, uint64_t>> words; // sorted by word

    bool has(uint32_t slot) const {
      auto w = slot / 64;
      auto i = std::lower_bound(words.begin(), words.end(), w,
                                [](const std::pair<uint32_t, uint64_t>& p,
                                   uint32_t v) { return p.first < v; });
      return i != words.end() && i->first == w &&
             (i->second >> (slot % 64) & 1) != 0;
    }
    template <typename F>
    void each(F&& f) const {
      for (const auto& [w, bits] : words)
        for (auto b = bits; b; b &= b - 1)
          f(w * 64 + static_cast<uint32_t>(__builtin_ctzll(b)));
    }
  };
  /// Deepest first; no empty group, no group of 0 blocks.
  std::vector<group> groups;
};

} // namespace outrider::indexer
