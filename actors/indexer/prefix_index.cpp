#include "actors/indexer/prefix_index.hpp"

#include <algorithm>

#include "actors/router/block_hash.hpp"

namespace outrider::indexer {

prefix_index::prefix_index(uint64_t seed) : seed_(seed) {}

namespace {

auto by_slot = [](const std::pair<slot_id, uint32_t>& h, slot_id s) {
  return h.first < s;
};

} // namespace

void prefix_index::add_holder(uint64_t seq, slot_id slot) {
  auto& e = holders_[seq];
  auto& h = e.holders;
  auto pos = std::lower_bound(h.begin(), h.end(), slot, by_slot);
  if (pos != h.end() && pos->first == slot) {
    ++pos->second;
    return;
  }
  h.insert(pos, holder{slot, 1});
  if (e.mask.size() <= slot / 64)
    e.mask.resize(slot / 64 + 1, 0);
  e.mask[slot / 64] |= uint64_t{1} << (slot % 64);
  ++entries_;
}

void prefix_index::drop_holder(uint64_t seq, slot_id slot) {
  auto i = holders_.find(seq);
  if (i == holders_.end())
    return;
  auto& h = i->second.holders;
  auto pos = std::lower_bound(h.begin(), h.end(), slot, by_slot);
  if (pos == h.end() || pos->first != slot)
    return;
  if (--pos->second == 0) {
    h.erase(pos);
    i->second.mask[slot / 64] &= ~(uint64_t{1} << (slot % 64));
    --entries_;
  }
  if (h.empty())
    holders_.erase(i);
}

void prefix_index::apply(slot_id slot,
                         const std::vector<kv::kv_event>& events) {
  if (slots_.size() <= slot)
    slots_.resize(slot + 1);
  auto& map = slots_[slot];
  for (const auto& ev : events) {
    if (auto* s = std::get_if<kv::block_stored>(&ev)) {
      std::optional<uint64_t> parent_seq;
      if (s->parent_block_hash) {
        auto p = map.find(*s->parent_block_hash);
        if (p == map.end()) {
          // Without the parent's sequence hash these blocks cannot be
          // placed; they stay out of the index (counted, not guessed).
          ++stats_.unknown_parent;
          continue;
        }
        parent_seq = p->second;
      }
      for (size_t i = 0; i < s->block_hashes.size(); ++i) {
        auto local = router::local_block_hash(
          s->token_ids.data() + i * s->block_size, s->block_size, seed_);
        auto seq =
          parent_seq ? router::chain_hash(*parent_seq, local, seed_) : local;
        auto [it, fresh] = map.try_emplace(s->block_hashes[i], seq);
        if (!fresh) { // stored again: it may now stand for other tokens
          drop_holder(it->second, slot);
          it->second = seq;
        }
        add_holder(seq, slot);
        parent_seq = seq;
        ++stats_.stored;
      }
    } else if (auto* r = std::get_if<kv::block_removed>(&ev)) {
      for (auto h : r->block_hashes) {
        auto i = map.find(h);
        if (i == map.end()) {
          ++stats_.unknown_removal;
          continue;
        }
        drop_holder(i->second, slot);
        map.erase(i);
        ++stats_.removed;
      }
    } else {
      stats_.cleared += map.size();
      clear_slot(slot);
    }
  }
}

void prefix_index::clear_slot(slot_id slot) {
  if (slot >= slots_.size())
    return;
  for (const auto& [engine, seq] : slots_[slot])
    drop_holder(seq, slot);
  slots_[slot].clear();
}

std::vector<overlap>
prefix_index::find_matches(const std::vector<uint64_t>& seq_hashes) const {
  std::vector<overlap> out;
  if (seq_hashes.empty())
    return out;
  auto first = holders_.find(seq_hashes[0]);
  if (first == holders_.end())
    return out;
  // The slots still matching, as a bitmask; a slot whose bit drops at
  // `depth` holds `depth` blocks.
  // Up to 256 slots without touching the heap.
  const auto& m0 = first->second.mask;
  uint64_t inline_words[4];
  std::vector<uint64_t> heap_words;
  uint64_t* active = inline_words;
  size_t words = m0.size();
  if (words > 4) {
    heap_words.assign(m0.begin(), m0.end());
    active = heap_words.data();
  } else {
    std::copy(m0.begin(), m0.end(), inline_words);
  }
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
    auto i = holders_.find(seq_hashes[depth]);
    any = false;
    for (size_t w = 0; w < words; ++w) {
      uint64_t keep = 0;
      if (i != holders_.end() && w < i->second.mask.size())
        keep = active[w] & i->second.mask[w];
      emit(w, active[w] & ~keep, depth);
      active[w] = keep;
      any |= keep != 0;
    }
  }
  for (size_t w = 0; w < words; ++w)
    emit(w, active[w], depth);
  return out;
}

} // namespace outrider::indexer
