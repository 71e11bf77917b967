#include "actors/indexer/tier_bound.hpp"

#include <unordered_set>
#include <variant>

namespace outrider::indexer {

namespace {

const block_info* find(const local_index& index, int rank, uint64_t hash) {
  auto r = index.ranks().find(rank);
  if (r == index.ranks().end())
    return nullptr;
  auto b = r->second.find(hash);
  return b == r->second.end() ? nullptr : &b->second;
}

bool holds(const block_info* b, kv::medium m) {
  if (!b)
    return false;
  for (const auto& r : b->where)
    if (r.medium == m)
      return true;
  return false;
}

} // namespace

std::vector<kv::kv_event>
tier_bound::evictions(const local_index& index, int rank,
                      const std::vector<kv::kv_event>& events) {
  // New blocks per offload medium. A batch of GPU events only (the
  // common one) costs one look at each event and nothing else.
  std::map<kv::medium, std::unordered_set<uint64_t>> fresh;
  for (const auto& ev : events) {
    if (std::holds_alternative<kv::all_blocks_cleared>(ev))
      return {}; // the rank is cleared: nothing old is left to evict
    auto* s = std::get_if<kv::block_stored>(&ev);
    if (!s || s->medium == kv::medium::gpu)
      continue;
    auto& t = tiers_[{rank, s->medium}];
    for (auto h : s->block_hashes)
      if (!t.stamp.count(h))
        fresh[s->medium].insert(h);
  }
  bool over = false;
  for (const auto& [medium, added] : fresh)
    over = over || tiers_[{rank, medium}].stamp.size() + added.size() > cap_;
  if (!over)
    return {};
  // Every block the batch names is the engine's to settle: never evicted.
  std::unordered_set<uint64_t> named;
  for (const auto& ev : events)
    std::visit(
      [&](const auto& e) {
        if constexpr (requires { e.block_hashes; })
          named.insert(e.block_hashes.begin(), e.block_hashes.end());
      },
      ev);
  std::vector<kv::kv_event> out;
  for (const auto& [medium, added] : fresh) {
    auto& t = tiers_[{rank, medium}];
    size_t after = t.stamp.size() + added.size();
    std::vector<std::pair<uint64_t, uint64_t>> spared; // keep their place
    while (after > cap_ && !t.order.empty()) {
      auto [hash, stamp] = t.order.front();
      t.order.pop_front();
      auto live = t.stamp.find(hash);
      if (live == t.stamp.end() || live->second != stamp)
        continue; // stale
      if (named.count(hash)) {
        spared.emplace_back(hash, stamp); // the batch settles it itself
        continue;
      }
      const auto* b = find(index, rank, hash);
      if (!holds(b, medium)) {
        t.stamp.erase(live);
        --after;
        continue;
      }
      // One removal per copy held there, in each place of that medium.
      for (const auto& r : b->where)
        if (r.medium == medium) {
          kv::block_removed rm;
          rm.block_hashes.assign(r.copies, hash);
          rm.medium = medium;
          rm.group_idx = r.group_idx;
          rm.locality = r.locality;
          rm.ownership = r.ownership;
          out.emplace_back(std::move(rm));
        }
      t.stamp.erase(live);
      --after;
    }
    for (auto it = spared.rbegin(); it != spared.rend(); ++it)
      t.order.push_front(*it);
  }
  return out;
}

void tier_bound::note(const local_index& index, int rank,
                      const std::vector<kv::kv_event>& events) {
  for (const auto& ev : events) {
    if (auto* s = std::get_if<kv::block_stored>(&ev)) {
      if (s->medium != kv::medium::gpu)
        for (auto h : s->block_hashes)
          sync(index, rank, h, s->medium, true);
    } else if (auto* r = std::get_if<kv::block_removed>(&ev)) {
      if (r->medium != kv::medium::gpu)
        for (auto h : r->block_hashes)
          sync(index, rank, h, r->medium, false);
    } else {
      rebuild(index, rank);
      return;
    }
  }
}

void tier_bound::sync(const local_index& index, int rank, uint64_t hash,
                      kv::medium medium, bool stored) {
  auto& t = tiers_[{rank, medium}];
  bool held = holds(find(index, rank, hash), medium);
  auto it = t.stamp.find(hash);
  if (held && (it == t.stamp.end() || stored)) {
    // New, or announced again (in use again): the newest now.
    t.stamp[hash] = ++clock_;
    t.order.emplace_back(hash, clock_);
    compact(t);
  } else if (!held && it != t.stamp.end()) {
    t.stamp.erase(it);
    compact(t);
  }
}

void tier_bound::compact(tier& t) {
  // Entries of blocks gone since linger in the order; drop them once they
  // are most of it, so memory follows what is held.
  if (t.order.size() < 1024 || t.order.size() < 2 * t.stamp.size())
    return;
  std::deque<std::pair<uint64_t, uint64_t>> kept;
  for (const auto& e : t.order)
    if (auto it = t.stamp.find(e.first);
        it != t.stamp.end() && it->second == e.second)
      kept.push_back(e);
  t.order = std::move(kept);
}

void tier_bound::rebuild(const local_index& index, int rank) {
  for (auto it = tiers_.begin(); it != tiers_.end();)
    it = it->first.first == rank ? tiers_.erase(it) : std::next(it);
  auto r = index.ranks().find(rank);
  if (r == index.ranks().end())
    return;
  for (const auto& [hash, info] : r->second)
    for (const auto& place : info.where)
      if (place.medium != kv::medium::gpu) {
        auto& t = tiers_[{rank, place.medium}];
        if (t.stamp.emplace(hash, ++clock_).second)
          t.order.emplace_back(hash, clock_);
      }
}

size_t tier_bound::held(int rank, kv::medium medium) const {
  auto it = tiers_.find({rank, medium});
  return it == tiers_.end() ? 0 : it->second.stamp.size();
}

size_t tier_bound::order_entries(int rank, kv::medium medium) const {
  auto it = tiers_.find({rank, medium});
  return it == tiers_.end() ? 0 : it->second.order.size();
}

} // namespace outrider::indexer
