#include "actors/indexer/local_index.hpp"

#include <algorithm>
#include <unordered_set>

namespace outrider::indexer {

namespace {

residency place_of(const kv::block_stored& s) {
  return residency{s.medium,    s.locality,  s.ownership,
                   s.group_idx, s.spec_kind, 1};
}

residency place_of(const kv::block_removed& r) {
  return residency{r.medium, r.locality, r.ownership, r.group_idx, {}, 1};
}

} // namespace

void add_copy(std::vector<residency>& where, residency place) {
  for (auto& r : where)
    if (r.same_place(place)) {
      if (place.medium != kv::medium::gpu)
        ++r.copies;
      if (!place.spec_kind.empty())
        r.spec_kind = std::move(place.spec_kind);
      return;
    }
  place.copies = 1;
  where.push_back(std::move(place));
}

bool drop_copy(std::vector<residency>& where, const residency& place) {
  auto it = std::find_if(where.begin(), where.end(), [&](const residency& r) {
    return r.same_place(place);
  });
  // A removal that names no group takes a copy of any group.
  if (it == where.end() && !place.group_idx)
    it = std::find_if(where.begin(), where.end(), [&](const residency& r) {
      auto any = place;
      any.group_idx = r.group_idx;
      return r.same_place(any);
    });
  if (it == where.end())
    return false;
  if (--it->copies == 0)
    where.erase(it);
  return true;
}

apply_stats local_index::apply(int rank,
                               const std::vector<kv::kv_event>& events) {
  apply_stats st;
  auto& blocks = ranks_[rank];
  for (const auto& ev : events) {
    if (auto* s = std::get_if<kv::block_stored>(&ev)) {
      if (s->tokenless()) {
        // An offload placeholder: a tier copy of a block we know, or a
        // block known only by its hash.
        for (auto h : s->block_hashes) {
          auto [it, fresh] = blocks.try_emplace(h);
          if (fresh)
            ++st.placeholders;
          add_copy(it->second.where, place_of(*s));
          ++st.stored;
        }
        continue;
      }
      if (s->parent_block_hash && !blocks.count(*s->parent_block_hash))
        ++st.unknown_parent;
      auto parent = s->parent_block_hash;
      for (size_t i = 0; i < s->block_hashes.size(); ++i) {
        auto first =
          s->token_ids.begin() + static_cast<ptrdiff_t>(i * s->block_size);
        auto& b = blocks[s->block_hashes[i]];
        b.parent = parent;
        b.token_ids.assign(first, first + s->block_size);
        b.identity = kv::identity_of(*s, i);
        add_copy(b.where, place_of(*s));
        parent = s->block_hashes[i];
        ++st.stored;
      }
    } else if (auto* r = std::get_if<kv::block_removed>(&ev)) {
      for (auto h : r->block_hashes) {
        auto it = blocks.find(h);
        if (it == blocks.end() || !drop_copy(it->second.where, place_of(*r))) {
          ++st.unknown_removal;
          continue;
        }
        if (it->second.where.empty())
          blocks.erase(it);
        ++st.removed;
      }
    } else {
      st.cleared += blocks.size();
      blocks.clear();
    }
  }
  return st;
}

std::optional<std::vector<kv::kv_event>>
local_index::without_noops(int rank, const std::vector<kv::kv_event>& events,
                           size_t* dropped) const {
  *dropped = 0;
  auto r = ranks_.find(rank);
  const rank_map* held = r == ranks_.end() ? nullptr : &r->second;
  bool cleared = false; // an AllBlocksCleared earlier in the batch
  std::unordered_set<uint64_t> stored;
  auto known = [&](uint64_t h) {
    return stored.count(h) > 0 || (!cleared && held && held->count(h) > 0);
  };
  // First pass: is anything a no-op? (The common batch has none: no copy.)
  bool any = false;
  for (const auto& ev : events) {
    if (auto* s = std::get_if<kv::block_stored>(&ev))
      stored.insert(s->block_hashes.begin(), s->block_hashes.end());
    else if (auto* rm = std::get_if<kv::block_removed>(&ev)) {
      for (auto h : rm->block_hashes)
        any = any || !known(h);
    } else {
      cleared = true;
      stored.clear();
    }
  }
  if (!any)
    return std::nullopt;
  stored.clear();
  cleared = false;
  std::vector<kv::kv_event> out;
  out.reserve(events.size());
  for (const auto& ev : events) {
    if (auto* s = std::get_if<kv::block_stored>(&ev)) {
      stored.insert(s->block_hashes.begin(), s->block_hashes.end());
      out.push_back(ev);
    } else if (auto* rm = std::get_if<kv::block_removed>(&ev)) {
      kv::block_removed kept = *rm;
      kept.block_hashes.clear();
      for (auto h : rm->block_hashes)
        if (known(h))
          kept.block_hashes.push_back(h);
        else
          ++*dropped;
      if (!kept.block_hashes.empty())
        out.push_back(std::move(kept));
    } else {
      cleared = true;
      stored.clear();
      out.push_back(ev);
    }
  }
  return out;
}

void local_index::put(int rank, uint64_t hash, block_info info) {
  ranks_[rank][hash] = std::move(info);
}

void local_index::clear_rank(int rank) {
  ranks_[rank].clear();
}

size_t local_index::blocks(int rank) const {
  auto i = ranks_.find(rank);
  return i == ranks_.end() ? 0 : i->second.size();
}

size_t local_index::total_blocks() const {
  size_t n = 0;
  for (const auto& [r, b] : ranks_)
    n += b.size();
  return n;
}

std::vector<kv::kv_event> local_index::snapshot_events(int rank) const {
  std::vector<kv::cached_block> blocks;
  if (auto i = ranks_.find(rank); i != ranks_.end())
    for (const auto& [hash, info] : i->second)
      for (const auto& r : info.where)
        for (uint32_t c = 0; c < r.copies; ++c)
          blocks.push_back(kv::cached_block{
            hash, info.parent, info.token_ids, info.identity, r.medium,
            r.locality, r.ownership, r.group_idx, r.spec_kind});
  return kv::stores_parents_first(std::move(blocks));
}

} // namespace outrider::indexer
