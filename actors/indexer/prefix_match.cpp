// Matching a prompt against the index: per slot (find_matches) or grouped
// by run length (find_groups). Both AND the 64-slot masks of each block of
// the prompt into the set still matching; a slot whose bit drops at depth
// d holds d leading blocks.
#include "actors/indexer/prefix_index.hpp"

namespace outrider::indexer {

std::vector<overlap>
prefix_index::find_matches(const std::vector<uint64_t>& seq_hashes) const {
  std::vector<overlap> out;
  for (const auto& g : find_groups(seq_hashes).groups)
    g.each([&](uint32_t slot) { out.push_back(overlap{slot, g.blocks}); });
  return out;
}

match_groups prefix_index::find_groups(const std::vector<uint64_t>& seq_hashes,
                                       const key_bits* also) const {
  match_groups out;
  if (seq_hashes.empty())
    return out;
  // The masks of one block: the index's (one word inline in the table,
  // the others sparse in its entry), and the other source's.
  struct masks {
    const block_ref* ref = nullptr;
    const slot_words* hi = nullptr;
    const key_bits::words* extra = nullptr;
  };
  // The walk reads its keys' table slots in order, each a cache miss in
  // an index of fleet size: they are asked for this many blocks ahead.
  constexpr size_t ahead = walk_ahead;
  auto prefetch = [&](size_t depth) {
    if (depth >= seq_hashes.size())
      return;
    table_.prefetch(seq_hashes[depth]);
    if (also)
      also->prefetch(seq_hashes[depth]);
  };
  for (size_t d = 0; d < ahead; ++d)
    prefetch(d);
  auto masks_of = [&](uint64_t key) {
    masks m;
    m.ref = table_.find(key);
    if (m.ref && m.ref->entry != 0)
      m.hi = &entries_[m.ref->entry];
    if (also)
      m.extra = also->find(key);
    return m;
  };
  // The bits of word `w` in a sorted sparse list, reading on from `*x`
  // (the words asked for come in increasing order: a merge, not a search).
  auto merged = [](const slot_words* ws, size_t& x, uint32_t w) -> uint64_t {
    if (!ws)
      return 0;
    while (x < ws->size() && (*ws)[x].first < w)
      ++x;
    return x < ws->size() && (*ws)[x].first == w ? (*ws)[x].second : 0;
  };
  // Per 64-slot word still matching: the slots whose run goes on, each
  // block held in the index or in the other source. Only such words are
  // carried down the prompt: once the holders of a shared prefix drop out,
  // the deeper blocks cost as many words as the few slots that hold them.
  struct word_state {
    uint32_t w;
    uint64_t live;
  };
  std::vector<word_state> active;
  auto first = masks_of(seq_hashes[0]);
  // Adds a word's bits to the sorted list (OR where the word is there).
  auto add_word = [&](uint32_t w, uint64_t bits) {
    auto i =
      std::lower_bound(active.begin(), active.end(), w,
                       [](const word_state& a, uint32_t v) { return a.w < v; });
    if (i != active.end() && i->w == w)
      i->live |= bits;
    else
      active.insert(i, {w, bits});
  };
  if (first.hi)
    for (size_t k = 0; k < first.hi->size(); ++k)
      active.push_back({(*first.hi)[k].first, (*first.hi)[k].second});
  if (first.ref && first.ref->bits)
    add_word(first.ref->w, first.ref->bits);
  if (first.extra)
    for (size_t k = 0; k < first.extra->size(); ++k)
      // Plain locals: a word is packed (slot_words.hpp).
      add_word((*first.extra)[k].first, (*first.extra)[k].second);
  auto drop = [&](uint32_t depth, uint32_t word, uint64_t bits) {
    if (out.groups.empty() || out.groups.back().blocks != depth)
      out.groups.push_back({depth, 0, {}});
    auto& g = out.groups.back();
    g.words.emplace_back(word, bits);
    g.count += static_cast<size_t>(__builtin_popcountll(bits));
  };
  // Whether a block's holders (in the index, and in the other source) are
  // those of the block before it: then every slot still matching goes on
  // and nothing is read (a shared prefix's blocks, held by the same
  // thousands of slots, cost a comparison each, not a pass over their
  // words). Compared by the sets' fingerprints (slot_words::same).
  static const slot_words none;
  auto words_of = [](const slot_words* w) { return w ? w : &none; };
  auto inline_word = [](const masks& m) {
    return m.ref && m.ref->bits ? std::pair{m.ref->w, m.ref->bits}
                                : std::pair{uint32_t{0}, uint64_t{0}};
  };
  auto same = [&](const masks& a, const masks& b) {
    return inline_word(a) == inline_word(b) &&
           words_of(a.hi)->same(*words_of(b.hi)) &&
           words_of(a.extra)->same(*words_of(b.extra));
  };
  auto prev = first;
  uint32_t depth = 1;
  for (; depth < seq_hashes.size() && !active.empty(); ++depth) {
    prefetch(depth + ahead);
    auto m = masks_of(seq_hashes[depth]);
    if (same(m, prev))
      continue;
    prev = m;
    size_t kept = 0;
    // Every word list is sorted: the block's words are merged in, not
    // searched for.
    size_t x = 0, y = 0;
    for (auto a : active) {
      // The inline word is never among the entry's (prefix_index.hpp).
      uint64_t mine = !m.ref            ? 0
                      : a.w == m.ref->w ? m.ref->bits
                                        : merged(m.hi, y, a.w);
      auto live = a.live & (mine | merged(m.extra, x, a.w));
      if (auto gone = a.live & ~live)
        drop(depth, a.w, gone);
      if (live)
        active[kept++] = {a.w, live};
    }
    active.resize(kept);
  }
  for (auto a : active)
    drop(depth, a.w, a.live);
  std::reverse(out.groups.begin(), out.groups.end());
  return out;
}

} // namespace outrider::indexer
