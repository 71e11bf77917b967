// Matching a prompt against the index: per slot (find_matches) or grouped
// by run length (find_groups). Both AND the 64-slot masks of each block of
// the prompt into the set still matching; a slot whose bit drops at depth
// d holds d leading blocks.
#include "actors/indexer/prefix_index.hpp"

namespace outrider::indexer {

std::vector<overlap>
prefix_index::find_matches(const std::vector<uint64_t>& seq_hashes) const {
  std::vector<overlap> out;
  if (seq_hashes.empty())
    return out;
  const auto* first = table_.find(seq_hashes[0]);
  if (!first)
    return out;
  // The slots still matching, as a bitmask; a slot whose bit drops at
  // `depth` holds `depth` blocks. Word 0 lives in the table itself.
  const auto& hi0 = entries_[first->entry].mask_hi;
  size_t words = 1 + hi0.size();
  uint64_t inline_words[4];
  std::vector<uint64_t> heap_words;
  uint64_t* active = inline_words;
  if (words > 4) {
    heap_words.resize(words);
    active = heap_words.data();
  }
  active[0] = first->mask0;
  for (size_t w = 1; w < words; ++w)
    active[w] = hi0[w - 1];
  size_t holders = 0;
  for (size_t w = 0; w < words; ++w)
    holders += static_cast<size_t>(__builtin_popcountll(active[w]));
  out.reserve(holders);
  auto emit = [&](size_t word, uint64_t bits, uint32_t depth) {
    while (bits) {
      auto bit = static_cast<uint32_t>(__builtin_ctzll(bits));
      out.push_back(overlap{static_cast<slot_id>(word * 64 + bit), depth});
      bits &= bits - 1;
    }
  };
  uint32_t depth = 1;
  bool any = true;
  for (; depth < seq_hashes.size() && any; ++depth) {
    const auto* ref = table_.find(seq_hashes[depth]);
    any = false;
    for (size_t w = 0; w < words; ++w) {
      uint64_t keep = 0;
      if (ref) {
        if (w == 0) {
          keep = active[0] & ref->mask0;
        } else {
          const auto& hi = entries_[ref->entry].mask_hi;
          if (w - 1 < hi.size())
            keep = active[w] & hi[w - 1];
        }
      }
      emit(w, active[w] & ~keep, depth);
      active[w] = keep;
      any |= keep != 0;
    }
  }
  for (size_t w = 0; w < words; ++w)
    emit(w, active[w], depth);
  return out;
}

match_groups prefix_index::find_groups(const std::vector<uint64_t>& seq_hashes,
                                       const key_bits* also) const {
  match_groups out;
  if (seq_hashes.empty())
    return out;
  // The masks of one block: the index's word w, and the other source's.
  struct masks {
    const block_ref* ref = nullptr;
    const std::vector<uint64_t>* hi = nullptr;
    const key_bits::words* extra = nullptr;
  };
  auto masks_of = [&](uint64_t key) {
    masks m;
    m.ref = table_.find(key);
    if (m.ref)
      m.hi = &entries_[m.ref->entry].mask_hi;
    if (also)
      m.extra = also->find(key);
    return m;
  };
  auto index_word = [](const masks& m, uint32_t w) -> uint64_t {
    if (!m.ref)
      return 0;
    if (w == 0)
      return m.ref->mask0;
    return w - 1 < m.hi->size() ? (*m.hi)[w - 1] : 0;
  };
  // Per 64-slot word still matching: the slots whose index run goes on,
  // and those whose run in the other source does. Only such words are
  // carried down the prompt: once the holders of a shared prefix drop out,
  // the deeper blocks cost as many words as the few slots that hold them.
  struct word_state {
    uint32_t w;
    uint64_t index, extra;
  };
  std::vector<word_state> active;
  auto first = masks_of(seq_hashes[0]);
  if (first.ref) {
    if (first.ref->mask0)
      active.push_back({0, first.ref->mask0, 0});
    for (size_t w = 0; w < first.hi->size(); ++w)
      if ((*first.hi)[w])
        active.push_back({static_cast<uint32_t>(w + 1), (*first.hi)[w], 0});
  }
  if (first.extra) {
    for (size_t k = 0; k < first.extra->size(); ++k) {
      auto [w, bits] = (*first.extra)[k];
      auto i = std::lower_bound(
        active.begin(), active.end(), w,
        [](const word_state& a, uint32_t v) { return a.w < v; });
      if (i != active.end() && i->w == w)
        i->extra = bits;
      else
        active.insert(i, {w, 0, bits});
    }
  }
  auto drop = [&](uint32_t depth, uint32_t word, uint64_t bits) {
    if (out.groups.empty() || out.groups.back().blocks != depth)
      out.groups.push_back({depth, 0, {}});
    auto& g = out.groups.back();
    g.words.emplace_back(word, bits);
    g.count += static_cast<size_t>(__builtin_popcountll(bits));
  };
  uint32_t depth = 1;
  for (; depth < seq_hashes.size() && !active.empty(); ++depth) {
    auto m = masks_of(seq_hashes[depth]);
    size_t kept = 0;
    // Both word lists are sorted: the other source's words are merged in,
    // not searched for.
    size_t x = 0;
    for (auto a : active) {
      uint64_t other = 0;
      if (m.extra) {
        while (x < m.extra->size() && (*m.extra)[x].first < a.w)
          ++x;
        if (x < m.extra->size() && (*m.extra)[x].first == a.w)
          other = (*m.extra)[x].second;
      }
      auto index = a.index & index_word(m, a.w);
      auto extra = a.extra & other;
      if (auto gone = (a.index | a.extra) & ~(index | extra))
        drop(depth, a.w, gone);
      if (index | extra)
        active[kept++] = {a.w, index, extra};
    }
    active.resize(kept);
  }
  for (auto a : active)
    drop(depth, a.w, a.index | a.extra);
  std::reverse(out.groups.begin(), out.groups.end());
  return out;
}

} // namespace outrider::indexer
