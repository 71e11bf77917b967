#include "actors/indexer/prefix_index.hpp"

#include <algorithm>

#include "cluster/kv/block_hash.hpp"

namespace outrider::indexer {

prefix_index::prefix_index(uint64_t seed) : seed_(seed) {}

namespace {

auto by_slot = [](const std::pair<slot_id, uint32_t>& h, slot_id s) {
  return h.first < s;
};

} // namespace

void prefix_index::add_holder(uint64_t seq, slot_id slot) {
  bool added = false;
  auto& ref = table_.insert(seq, added);
  if (added) {
    if (free_entries_.empty()) {
      ref.entry = static_cast<uint32_t>(entries_.size());
      entries_.emplace_back();
    } else {
      ref.entry = free_entries_.back();
      free_entries_.pop_back();
    }
  }
  auto& e = entries_[ref.entry];
  auto& h = e.holders;
  auto pos = std::lower_bound(h.begin(), h.end(), slot, by_slot);
  if (pos != h.end() && pos->first == slot) {
    ++pos->second;
    return;
  }
  h.insert(pos, holder{slot, 1});
  if (slot < 64) {
    ref.mask0 |= uint64_t{1} << slot;
  } else {
    auto w = slot / 64 - 1;
    if (e.mask_hi.size() <= w)
      e.mask_hi.resize(w + 1, 0);
    e.mask_hi[w] |= uint64_t{1} << (slot % 64);
  }
  ++entries_count_;
}

void prefix_index::drop_holder(uint64_t seq, slot_id slot) {
  auto* ref = table_.find(seq);
  if (!ref)
    return;
  auto& e = entries_[ref->entry];
  auto& h = e.holders;
  auto pos = std::lower_bound(h.begin(), h.end(), slot, by_slot);
  if (pos == h.end() || pos->first != slot)
    return;
  if (--pos->second == 0) {
    h.erase(pos);
    if (slot < 64)
      ref->mask0 &= ~(uint64_t{1} << slot);
    else
      e.mask_hi[slot / 64 - 1] &= ~(uint64_t{1} << (slot % 64));
    --entries_count_;
  }
  if (h.empty()) {
    e = block_entry{};
    free_entries_.push_back(ref->entry);
    table_.erase(seq);
  }
}

void prefix_index::apply(slot_id slot, const std::vector<kv::kv_event>& events,
                         std::vector<uint64_t>* touched) {
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
        auto local = kv::local_block_hash(
          s->token_ids.data() + i * s->block_size, s->block_size, seed_);
        auto seq =
          parent_seq ? kv::chain_hash(*parent_seq, local, seed_) : local;
        auto [it, fresh] = map.try_emplace(s->block_hashes[i], seq);
        if (!fresh) { // stored again: it may now stand for other tokens
          drop_holder(it->second, slot);
          it->second = seq;
        }
        add_holder(seq, slot);
        if (touched)
          touched->push_back(seq);
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
        if (touched)
          touched->push_back(i->second);
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

std::vector<uint64_t> prefix_index::engine_hashes(slot_id slot) const {
  std::vector<uint64_t> out;
  if (slot < slots_.size())
    for (const auto& [engine, seq] : slots_[slot])
      out.push_back(engine);
  std::sort(out.begin(), out.end());
  return out;
}

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

} // namespace outrider::indexer
