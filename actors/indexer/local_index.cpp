#include "actors/indexer/local_index.hpp"

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

std::vector<kv::kv_event> local_index::snapshot_events(int rank) const {
  std::vector<kv::cached_block> blocks;
  if (auto i = ranks_.find(rank); i != ranks_.end())
    for (const auto& [hash, info] : i->second)
      blocks.push_back(kv::cached_block{hash, info.parent, info.token_ids});
  return kv::stores_parents_first(std::move(blocks));
}

} // namespace outrider::indexer
