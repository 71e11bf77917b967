#include "actors/indexer/local_index.hpp"

#include <algorithm>

namespace outrider::indexer {

apply_stats local_index::apply(int rank,
                               const std::vector<kv::kv_event>& events) {
  apply_stats st;
  auto& blocks = ranks_[rank];
  for (const auto& ev : events) {
    if (auto* s = std::get_if<kv::block_stored>(&ev)) {
      if (s->parent_block_hash && !blocks.count(*s->parent_block_hash))
        ++st.unknown_parent;
      auto parent = s->parent_block_hash;
      for (size_t i = 0; i < s->block_hashes.size(); ++i) {
        auto first =
          s->token_ids.begin() + static_cast<ptrdiff_t>(i * s->block_size);
        blocks[s->block_hashes[i]] =
          block_info{parent, {first, first + s->block_size}};
        parent = s->block_hashes[i];
        ++st.stored;
      }
    } else if (auto* r = std::get_if<kv::block_removed>(&ev)) {
      for (auto h : r->block_hashes) {
        if (blocks.erase(h))
          ++st.removed;
        else
          ++st.unknown_removal;
      }
    } else {
      st.cleared += blocks.size();
      blocks.clear();
    }
  }
  return st;
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

std::vector<kv::kv_event>
local_index::snapshot_events(int rank, uint32_t block_size) const {
  std::vector<kv::kv_event> out;
  auto i = ranks_.find(rank);
  if (i == ranks_.end())
    return out;
  const auto& blocks = i->second;
  // Depth of each block in its chain, memoized so that the walk is linear.
  std::unordered_map<uint64_t, size_t> depth;
  depth.reserve(blocks.size());
  std::vector<uint64_t> path;
  for (const auto& [hash, info] : blocks) {
    path.clear();
    uint64_t h = hash;
    size_t base = 0;
    for (size_t guard = 0; guard <= blocks.size(); ++guard) {
      if (auto d = depth.find(h); d != depth.end()) {
        base = d->second + 1;
        break;
      }
      path.push_back(h);
      const auto& parent = blocks.at(h).parent;
      if (!parent || !blocks.count(*parent))
        break;
      h = *parent;
    }
    for (auto it = path.rbegin(); it != path.rend(); ++it)
      depth[*it] = base++;
  }
  std::vector<std::pair<size_t, uint64_t>> ordered;
  ordered.reserve(blocks.size());
  for (const auto& [hash, d] : depth)
    ordered.emplace_back(d, hash);
  std::sort(ordered.begin(), ordered.end());
  for (const auto& [depth, hash] : ordered) {
    const auto& info = blocks.at(hash);
    out.push_back(
      kv::block_stored{{hash}, info.parent, info.token_ids, block_size});
  }
  return out;
}

} // namespace outrider::indexer
