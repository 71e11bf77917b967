#include "sim/block_manager.hpp"

#include <stdexcept>

namespace outrider::sim {

block_manager::block_manager(uint32_t num_blocks, uint32_t block_size)
  : num_blocks_(num_blocks), block_size_(block_size), blocks_(num_blocks) {
  free_.reserve(num_blocks);
  // Hand out low ids first.
  for (uint32_t i = num_blocks; i > 0; --i)
    free_.push_back(static_cast<int32_t>(i - 1));
}

size_t block_manager::match_prefix(const std::vector<uint64_t>& hashes) const {
  size_t n = 0;
  while (n < hashes.size() && index_.count(hashes[n]))
    ++n;
  return n;
}

std::vector<int32_t>
block_manager::acquire(const std::vector<uint64_t>& hashes) {
  std::vector<int32_t> out;
  out.reserve(hashes.size());
  for (auto h : hashes) {
    auto i = index_.find(h);
    if (i == index_.end())
      throw std::logic_error("acquire of an uncached block");
    auto& b = blocks_[i->second];
    if (b.refs == 0) {
      lru_.erase(b.lru_pos);
      ++used_;
    }
    ++b.refs;
    out.push_back(i->second);
  }
  return out;
}

std::optional<int32_t> block_manager::allocate() {
  int32_t id;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
  } else if (!lru_.empty()) {
    id = lru_.front();
    lru_.pop_front();
    auto& victim = blocks_[id];
    index_.erase(victim.hash);
    events_.push_back(block_removed{{victim.hash}});
  } else {
    return std::nullopt;
  }
  auto& b = blocks_[id];
  b = block{};
  b.refs = 1;
  ++used_;
  return id;
}

void block_manager::release(int32_t id) {
  auto& b = blocks_[id];
  if (b.refs == 0)
    throw std::logic_error("release of an idle block");
  if (--b.refs > 0)
    return;
  --used_;
  if (b.cached) {
    lru_.push_back(id);
    b.lru_pos = std::prev(lru_.end());
  } else {
    free_.push_back(id);
  }
}

bool block_manager::commit(int32_t id, uint64_t hash,
                           std::optional<uint64_t> parent,
                           std::vector<uint32_t> tokens,
                           kv::block_identity identity) {
  auto& b = blocks_[id];
  if (b.cached || index_.count(hash))
    return false;
  b.cached = true;
  b.hash = hash;
  b.parent = parent;
  b.tokens = std::move(tokens);
  b.identity = std::move(identity);
  index_.emplace(hash, id);
  return true;
}

void block_manager::clear() {
  for (auto id : lru_) {
    blocks_[id].cached = false;
    free_.push_back(id);
  }
  lru_.clear();
  for (auto& [hash, id] : index_)
    blocks_[id].cached = false;
  index_.clear();
  events_.push_back(all_blocks_cleared{});
}

std::vector<kv_event> block_manager::take_events() {
  std::vector<kv_event> out;
  out.swap(events_);
  return out;
}

std::vector<cached_block> block_manager::snapshot() const {
  std::vector<cached_block> out;
  out.reserve(index_.size());
  for (const auto& [hash, id] : index_) {
    const auto& b = blocks_[id];
    cached_block c;
    c.hash = hash;
    c.parent = b.parent;
    c.token_ids = b.tokens;
    c.identity = b.identity;
    out.push_back(std::move(c));
  }
  return out;
}

} // namespace outrider::sim
