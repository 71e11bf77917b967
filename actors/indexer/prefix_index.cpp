#include "actors/indexer/prefix_index.hpp"

#include <algorithm>

#include "cluster/kv/block_hash.hpp"

namespace outrider::indexer {

prefix_index::prefix_index(uint64_t seed, bool counted)
  : seed_(seed), counted_(counted) {}

void prefix_index::add_holder(uint64_t seq, slot_id slot) {
  bool added = false;
  auto& ref = table_.insert(seq, added);
  uint32_t word = slot / 64;
  if (ref.bits == 0 && ref.entry == 0)
    ref.w = word; // a block new, or held by none: its first holder's word
  if (word == ref.w) {
    auto bit = uint64_t{1} << (slot % 64);
    if (ref.bits & bit) {
      ++extra_holds_[{seq, slot}];
      return;
    }
    ref.bits |= bit;
  } else {
    if (ref.entry == 0) {
      if (free_entries_.empty()) {
        ref.entry = static_cast<uint32_t>(entries_.size());
        entries_.emplace_back();
      } else {
        ref.entry = free_entries_.back();
        free_entries_.pop_back();
      }
    }
    if (!entries_[ref.entry].set(slot)) {
      ++extra_holds_[{seq, slot}];
      return;
    }
  }
  ++entries_count_;
}

void prefix_index::drop_holder(uint64_t seq, slot_id slot) {
  auto* ref = table_.find(seq);
  if (!ref)
    return;
  // A further copy goes first (there is one only where the slot holds it).
  if (!extra_holds_.empty()) {
    auto x = extra_holds_.find({seq, slot});
    if (x != extra_holds_.end()) {
      if (--x->second == 0)
        extra_holds_.erase(x);
      return;
    }
  }
  if (slot / 64 == ref->w) {
    auto bit = uint64_t{1} << (slot % 64);
    if (!(ref->bits & bit))
      return;
    ref->bits &= ~bit;
  } else {
    if (ref->entry == 0)
      return;
    auto& hi = entries_[ref->entry];
    if (!hi.clear(slot))
      return;
    if (hi.empty()) {
      hi = slot_words{}; // its heap words go now
      free_entries_.push_back(ref->entry);
      ref->entry = 0;
    }
  }
  --entries_count_;
  if (ref->bits == 0 && ref->entry == 0)
    table_.erase(seq);
}

std::optional<uint64_t> prefix_index::key_of(slot_id slot,
                                             uint64_t engine_hash) const {
  if (slot >= slots_.size())
    return std::nullopt;
  const auto* b = slots_[slot].map.find(engine_hash);
  if (!b)
    return std::nullopt;
  return b->key;
}

void prefix_index::put(slot_id slot, uint64_t engine_hash, uint64_t key,
                       std::vector<uint64_t>* touched) {
  if (slots_.size() <= slot)
    slots_.resize(slot + 1);
  auto& sb = slots_[slot];
  if (sb.expect && sb.map.size() == 0)
    sb.map.reserve(sb.expect); // nothing if already allocated
  bool fresh = false;
  auto& b = sb.map.insert(engine_hash, fresh);
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
  b.stamp = sb.next_stamp++;
  if (sb.order)
    sb.order->emplace_back(engine_hash, b.stamp);
  if (sb.cap && sb.map.size() > sb.cap)
    enforce_cap(slot);
  if (touched)
    touched->push_back(key);
  ++stats_.stored;
}

bool prefix_index::drop(slot_id slot, uint64_t engine_hash,
                        std::vector<uint64_t>* touched) {
  if (slot >= slots_.size())
    return false;
  auto& map = slots_[slot].map;
  auto* b = map.find(engine_hash);
  if (!b)
    return false;
  ++stats_.removed;
  if (touched)
    touched->push_back(b->key);
  if (--b->copies > 0)
    return true;
  drop_holder(b->key, slot);
  map.erase(engine_hash);
  // Well under its cap again (an engine that removes): the store order
  // goes until the cap is reached again.
  auto& sb = slots_[slot];
  if (sb.order && sb.map.size() < sb.cap / 2)
    sb.order.reset();
  return true;
}

bool prefix_index::holds(uint64_t key, slot_id slot) const {
  const auto* ref = table_.find(key);
  if (!ref)
    return false;
  if (slot / 64 == ref->w)
    return (ref->bits >> (slot % 64)) & 1;
  return ref->entry != 0 && entries_[ref->entry].test(slot);
}

uint32_t prefix_index::holds_along(const std::vector<uint64_t>& keys,
                                   slot_id slot,
                                   std::vector<uint8_t>& out) const {
  out.assign(keys.size(), 0);
  for (size_t d = 0; d < walk_ahead && d < keys.size(); ++d)
    table_.prefetch(keys[d]);
  const block_ref* prev = nullptr;
  uint32_t run = 0;
  bool in_run = true;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (i + walk_ahead < keys.size())
      table_.prefetch(keys[i + walk_ahead]);
    const auto* ref = table_.find(keys[i]);
    bool held = false;
    if (ref && slot / 64 == ref->w) {
      held = (ref->bits >> (slot % 64)) & 1;
    } else if (ref && ref->entry != 0) {
      const auto& hi = entries_[ref->entry];
      // The entry's words, not the inline word, answered for the block
      // before too: the same words, the same answer.
      held = prev && prev->w != slot / 64 && prev->entry != 0 &&
                 hi.same(entries_[prev->entry])
               ? out[i - 1] != 0
               : hi.test(slot);
    }
    prev = ref;
    out[i] = held ? 1 : 0;
    in_run = in_run && held;
    run += in_run ? 1 : 0;
  }
  return run;
}

void prefix_index::set_cap(slot_id slot, size_t cap) {
  if (slots_.size() <= slot)
    slots_.resize(slot + 1);
  auto& sb = slots_[slot];
  if (sb.cap == cap)
    return;
  sb.cap = cap;
  sb.order.reset();
  if (cap)
    enforce_cap(slot);
}

bool prefix_index::tidy(size_t budget) {
  bool left = table_.tidy(budget);
  for (auto& sb : slots_)
    left = sb.map.tidy(budget) || left;
  return left;
}

void prefix_index::expect(slot_id slot, size_t blocks) {
  if (slots_.size() <= slot)
    slots_.resize(slot + 1);
  slots_[slot].expect = blocks;
}

void prefix_index::enforce_cap(slot_id slot) {
  auto& sb = slots_[slot];
  if (sb.map.size() <= sb.cap)
    return;
  // Past the cap for the first time (or again): the store order of what it
  // holds, oldest first, kept from now on. Stamps are compared by age,
  // which survives their wrapping around.
  if (!sb.order) {
    sb.order = std::make_unique<slot_blocks::store_order>();
    std::vector<std::pair<uint32_t, uint64_t>> by_age; // (age, hash)
    by_age.reserve(sb.map.size());
    sb.map.each([&](uint64_t hash, const held_block& b) {
      by_age.emplace_back(sb.next_stamp - b.stamp, hash);
    });
    std::sort(by_age.begin(), by_age.end(),
              [](const auto& x, const auto& y) { return x.first > y.first; });
    for (const auto& [age, hash] : by_age)
      sb.order->emplace_back(hash, sb.next_stamp - age);
  }
  auto& order = *sb.order;
  while (sb.map.size() > sb.cap && !order.empty()) {
    auto [hash, stamp] = order.front();
    order.pop_front();
    auto* b = sb.map.find(hash);
    if (!b || b->stamp != stamp)
      continue; // removed or stored again since
    drop_holder(b->key, slot);
    sb.map.erase(hash);
    ++stats_.evicted;
  }
  // Stale entries pile up while the engine does remove: rebuilt when they
  // outnumber the live ones, so the order stays within twice the cap.
  if (order.size() > 2 * sb.map.size() + 1024) {
    slot_blocks::store_order live;
    for (const auto& e : order) {
      auto* b = sb.map.find(e.first);
      if (b && b->stamp == e.second)
        live.push_back(e);
    }
    order.swap(live);
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
  slots_[slot].map.each(
    [&](uint64_t, const held_block& b) { drop_holder(b.key, slot); });
  slots_[slot].map.clear();
  slots_[slot].order.reset();
}

std::vector<uint64_t> prefix_index::engine_hashes(slot_id slot) const {
  std::vector<uint64_t> out;
  if (slot < slots_.size())
    slots_[slot].map.each(
      [&](uint64_t engine, const held_block&) { out.push_back(engine); });
  std::sort(out.begin(), out.end());
  return out;
}

} // namespace outrider::indexer
