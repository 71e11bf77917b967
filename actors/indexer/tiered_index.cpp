#include "actors/indexer/tiered_index.hpp"

#include <algorithm>

#include "cluster/kv/block_hash.hpp"

namespace outrider::indexer {

tiered_index::tiered_index(uint64_t seed, tier_policy policy)
  : seed_(seed),
    policy_(policy), tiers_{prefix_index{seed, false}, prefix_index{seed, true},
                            prefix_index{seed, true}} {}

bool tiered_index::credited(kv::locality l,
                            const std::string& ownership) const {
  if (l == kv::locality::remote && !policy_.credit_remote)
    return false;
  return ownership.empty() || policy_.credit_foreign;
}

bool tiered_index::other_group(slot_id slot,
                               std::optional<uint32_t> group) const {
  if (!group)
    return false;
  auto i = other_groups_.find(slot);
  return i != other_groups_.end() && i->second.count(*group);
}

std::optional<uint64_t> tiered_index::key_anywhere(slot_id slot,
                                                   uint64_t hash) const {
  for (const auto& t : tiers_)
    if (auto k = t.key_of(slot, hash))
      return k;
  return std::nullopt;
}

bool tiered_index::offloaded() const {
  return tiers_[1].entries() != 0 || tiers_[2].entries() != 0;
}

void tiered_index::apply(slot_id slot, const std::vector<kv::kv_event>& events,
                         std::vector<uint64_t>* touched) {
  for (const auto& ev : events) {
    if (auto* s = std::get_if<kv::block_stored>(&ev)) {
      if (!kv::serves_prefix(s->spec_kind)) {
        if (s->group_idx)
          other_groups_[slot].insert(*s->group_idx);
        stats_.other_groups += s->block_hashes.size();
        continue;
      }
      if (other_group(slot, s->group_idx)) {
        stats_.other_groups += s->block_hashes.size();
        continue;
      }
      if (!credited(s->locality, s->ownership)) {
        stats_.not_credited += s->block_hashes.size();
        continue;
      }
      auto& tier = tiers_[static_cast<size_t>(s->medium)];
      if (s->tokenless()) {
        for (auto h : s->block_hashes)
          if (auto k = key_anywhere(slot, h))
            tier.put(slot, h, *k, touched);
          else
            ++stats_.placeholders_unresolved;
        continue;
      }
      std::optional<uint64_t> parent;
      if (s->parent_block_hash) {
        parent = key_anywhere(slot, *s->parent_block_hash);
        if (!parent) {
          tier.mutable_stats().unknown_parent += s->block_hashes.size();
          continue;
        }
      }
      for (size_t i = 0; i < s->block_hashes.size(); ++i) {
        auto key =
          kv::block_key(s->token_ids.data() + i * s->block_size, s->block_size,
                        kv::identity_of(*s, i), parent, seed_);
        tier.put(slot, s->block_hashes[i], key, touched);
        parent = key;
      }
    } else if (auto* r = std::get_if<kv::block_removed>(&ev)) {
      if (other_group(slot, r->group_idx)) {
        stats_.other_groups += r->block_hashes.size();
        continue;
      }
      if (!credited(r->locality, r->ownership)) {
        stats_.not_credited += r->block_hashes.size();
        continue;
      }
      auto& tier = tiers_[static_cast<size_t>(r->medium)];
      for (auto h : r->block_hashes)
        if (!tier.drop(slot, h, touched))
          ++tier.mutable_stats().unknown_removal;
    } else {
      for (auto& t : tiers_) {
        t.mutable_stats().cleared += t.held(slot);
        t.clear_slot(slot);
      }
    }
  }
}

void tiered_index::clear_slot(slot_id slot) {
  for (auto& t : tiers_)
    t.clear_slot(slot);
  other_groups_.erase(slot);
}

void tiered_index::set_cap(slot_id slot, kv::medium m, size_t cap) {
  tiers_[static_cast<size_t>(m)].set_cap(slot, cap);
}

size_t tiered_index::held_all(slot_id slot) const {
  size_t n = 0;
  for (const auto& t : tiers_)
    n += t.held(slot);
  return n;
}

size_t tiered_index::entries() const {
  size_t n = 0;
  for (const auto& t : tiers_)
    n += t.entries();
  return n;
}

prefix_index::counters tiered_index::tier_stats() const {
  prefix_index::counters c;
  for (const auto& t : tiers_) {
    const auto& s = t.stats();
    c.stored += s.stored;
    c.removed += s.removed;
    c.cleared += s.cleared;
    c.unknown_parent += s.unknown_parent;
    c.unknown_removal += s.unknown_removal;
    c.evicted += s.evicted;
  }
  return c;
}

std::vector<tiered_overlap>
tiered_index::find(const std::vector<uint64_t>& keys) const {
  std::vector<tiered_overlap> out;
  for (auto o : tiers_[0].find_matches(keys))
    out.push_back({o.slot, o.blocks, o.blocks, static_cast<double>(o.blocks)});
  if (!offloaded() || keys.empty())
    return out;
  // Slots holding the first block only offloaded join with no GPU run.
  std::unordered_map<slot_id, size_t> at;
  for (size_t i = 0; i < out.size(); ++i)
    at[out[i].slot] = i;
  for (size_t t = 1; t < tiers_.size(); ++t)
    for (auto o : tiers_[t].find_matches({keys[0]}))
      if (at.emplace(o.slot, out.size()).second)
        out.push_back({o.slot, 0, 0, 0});
  // Extend each run past the GPU's while some tier holds the next block,
  // each block credited by the best tier holding it.
  for (auto& o : out) {
    auto d = o.gpu_blocks;
    for (; d < keys.size(); ++d) {
      double best = -1;
      for (size_t t = 0; t < tiers_.size(); ++t)
        if (tiers_[t].holds(keys[d], o.slot))
          best = std::max(best, policy_.weight[t]);
      if (best < 0)
        break;
      o.credit += best;
    }
    o.any_blocks = d;
  }
  return out;
}

std::vector<tiered_overlap>
tiered_index::find_offloaded(const std::vector<uint64_t>& keys) const {
  if (!offloaded())
    return {};
  auto all = find(keys);
  std::erase_if(
    all, [](const tiered_overlap& o) { return o.any_blocks <= o.gpu_blocks; });
  return all;
}

} // namespace outrider::indexer
