#include "actors/indexer/prefix_index.hpp"

#include <algorithm>

#include "cluster/kv/block_hash.hpp"

namespace outrider::indexer {

prefix_index::prefix_index(uint64_t seed, bool counted)
  : seed_(seed), counted_(counted) {}

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
  if (slot < 64)
    ref.mask0 |= uint64_t{1} << slot;
  else
    e.hi.set(slot);
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
      e.hi.clear(slot);
    --entries_count_;
  }
  if (h.empty()) {
    e = block_entry{};
    free_entries_.push_back(ref->entry);
    table_.erase(seq);
  }
}

std::optional<uint64_t> prefix_index::key_of(slot_id slot,
                                             uint64_t engine_hash) const {
  if (slot >= slots_.size())
    return std::nullopt;
  auto i = slots_[slot].map.find(engine_hash);
  if (i == slots_[slot].map.end())
    return std::nullopt;
  return i->second.key;
}

void prefix_index::put(slot_id slot, uint64_t engine_hash, uint64_t key,
                       std::vector<uint64_t>* touched) {
  if (slots_.size() <= slot)
    slots_.resize(slot + 1);
  auto& sb = slots_[slot];
  auto [it, fresh] = sb.map.try_emplace(engine_hash);
  auto& b = it->second;
  if (!fresh && b.key != key) { // stored again: it now stands for other KV
    drop_holder(b.key, slot);
    b.copies = 0;
    fresh = true;
  }
  if (fresh) {
    b.key = key;
    add_holder(key, slot);
  }
  b.copies = counted_ || fresh ? b.copies + 1 : 1;
  if (sb.cap) {
    b.stamp = sb.next_stamp++;
    sb.order.emplace_back(engine_hash, b.stamp);
    enforce_cap(slot);
  }
  if (touched)
    touched->push_back(key);
  ++stats_.stored;
}

bool prefix_index::drop(slot_id slot, uint64_t engine_hash,
                        std::vector<uint64_t>* touched) {
  if (slot >= slots_.size())
    return false;
  auto& map = slots_[slot].map;
  auto i = map.find(engine_hash);
  if (i == map.end())
    return false;
  ++stats_.removed;
  if (touched)
    touched->push_back(i->second.key);
  if (--i->second.copies > 0)
    return true;
  drop_holder(i->second.key, slot);
  map.erase(i);
  return true;
}

bool prefix_index::holds(uint64_t key, slot_id slot) const {
  const auto* ref = table_.find(key);
  if (!ref)
    return false;
  if (slot < 64)
    return (ref->mask0 >> slot) & 1;
  return entries_[ref->entry].hi.test(slot);
}

void prefix_index::set_cap(slot_id slot, size_t cap) {
  if (slots_.size() <= slot)
    slots_.resize(slot + 1);
  auto& sb = slots_[slot];
  if (sb.cap == cap)
    return;
  sb.cap = cap;
  sb.order.clear();
  if (!cap)
    return;
  // Blocks held before the cap was known count as older than any after.
  for (auto& [hash, b] : sb.map) {
    b.stamp = sb.next_stamp++;
    sb.order.emplace_back(hash, b.stamp);
  }
  enforce_cap(slot);
}

void prefix_index::enforce_cap(slot_id slot) {
  auto& sb = slots_[slot];
  while (sb.map.size() > sb.cap && !sb.order.empty()) {
    auto [hash, stamp] = sb.order.front();
    sb.order.pop_front();
    auto i = sb.map.find(hash);
    if (i == sb.map.end() || i->second.stamp != stamp)
      continue; // removed or stored again since
    drop_holder(i->second.key, slot);
    sb.map.erase(i);
    ++stats_.evicted;
  }
  // Stale entries pile up while the engine does remove: rebuilt when they
  // outnumber the live ones, so the order stays within twice the cap.
  if (sb.order.size() > 2 * sb.map.size() + 1024) {
    std::deque<std::pair<uint64_t, uint32_t>> live;
    for (const auto& e : sb.order) {
      auto i = sb.map.find(e.first);
      if (i != sb.map.end() && i->second.stamp == e.second)
        live.push_back(e);
    }
    sb.order.swap(live);
  }
}

void prefix_index::apply(slot_id slot, const std::vector<kv::kv_event>& events,
                         std::vector<uint64_t>* touched) {
  if (slots_.size() <= slot)
    slots_.resize(slot + 1);
  for (const auto& ev : events) {
    if (auto* s = std::get_if<kv::block_stored>(&ev)) {
      std::optional<uint64_t> parent_key;
      if (s->tokenless()) {
        // An offload placeholder: only a block known by its hash here.
        for (auto h : s->block_hashes)
          if (auto k = key_of(slot, h))
            put(slot, h, *k, touched);
          else
            ++stats_.unknown_parent;
        continue;
      }
      if (s->parent_block_hash) {
        parent_key = key_of(slot, *s->parent_block_hash);
        if (!parent_key) {
          // Without the parent's key these blocks cannot be placed; they
          // stay out of the index (counted, not guessed).
          stats_.unknown_parent += s->block_hashes.size();
          continue;
        }
      }
      for (size_t i = 0; i < s->block_hashes.size(); ++i) {
        auto key =
          kv::block_key(s->token_ids.data() + i * s->block_size, s->block_size,
                        kv::identity_of(*s, i), parent_key, seed_);
        put(slot, s->block_hashes[i], key, touched);
        parent_key = key;
      }
    } else if (auto* r = std::get_if<kv::block_removed>(&ev)) {
      for (auto h : r->block_hashes)
        if (!drop(slot, h, touched))
          ++stats_.unknown_removal;
    } else {
      stats_.cleared += slots_[slot].map.size();
      clear_slot(slot);
    }
  }
}

void prefix_index::clear_slot(slot_id slot) {
  if (slot >= slots_.size())
    return;
  for (const auto& [engine, b] : slots_[slot].map)
    drop_holder(b.key, slot);
  slots_[slot].map.clear();
  slots_[slot].order.clear();
}

std::vector<uint64_t> prefix_index::engine_hashes(slot_id slot) const {
  std::vector<uint64_t> out;
  if (slot < slots_.size())
    for (const auto& [engine, b] : slots_[slot].map)
      out.push_back(engine);
  std::sort(out.begin(), out.end());
  return out;
}

} // namespace outrider::indexer
