#include "sim/offload_tier.hpp"

namespace outrider::sim {

void offload_tier::write_through(
  const kv::block_stored& gpu,
  const std::function<void(kv::kv_event)>& record) {
  if (cfg_.capacity == 0)
    return;
  auto parent = gpu.parent_block_hash;
  for (size_t i = 0; i < gpu.block_hashes.size(); ++i) {
    auto h = gpu.block_hashes[i];
    auto first =
      gpu.token_ids.begin() + static_cast<ptrdiff_t>(i * gpu.block_size);
    std::vector<uint32_t> toks(first, first + gpu.block_size);
    auto this_parent = parent;
    parent = h;
    if (auto at = blocks_.find(h); at != blocks_.end()) {
      lru_.splice(lru_.end(), lru_, at->second.lru_pos);
      continue;
    }
    // Room first: the oldest copy goes.
    while (blocks_.size() >= cfg_.capacity && !lru_.empty()) {
      auto victim = lru_.front();
      lru_.pop_front();
      blocks_.erase(victim);
      if (!cfg_.store_only) {
        kv::block_removed rm;
        rm.block_hashes = {victim};
        rm.medium = kv::medium::cpu;
        rm.locality = cfg_.locality;
        record(std::move(rm));
      }
    }
    kv::block_stored s;
    s.block_hashes = {h};
    s.medium = kv::medium::cpu;
    s.locality = cfg_.locality;
    auto id = kv::identity_of(gpu, i);
    if (!cfg_.placeholders) {
      // Self-describing: what the GPU store said of this block.
      s.parent_block_hash = this_parent;
      s.token_ids = toks;
      s.block_size = gpu.block_size;
      s.lora_name = gpu.lora_name;
      if (i < gpu.extra_keys.size() && !gpu.extra_keys[i].empty())
        s.extra_keys = {gpu.extra_keys[i]};
    }
    record(std::move(s));
    lru_.push_back(h);
    blocks_.emplace(h, copy{this_parent, std::move(toks), std::move(id),
                            std::prev(lru_.end())});
  }
}

size_t offload_tier::hits(const std::vector<uint64_t>& hashes,
                          size_t from) const {
  size_t n = 0;
  while (from + n < hashes.size() && blocks_.count(hashes[from + n]))
    ++n;
  return n;
}

void offload_tier::snapshot(std::vector<kv::cached_block>& out) const {
  for (const auto& [hash, c] : blocks_) {
    kv::cached_block b;
    b.hash = hash;
    b.parent = c.parent;
    b.token_ids = c.tokens;
    b.identity = c.identity;
    b.medium = kv::medium::cpu;
    b.locality = cfg_.locality;
    out.push_back(std::move(b));
  }
}

} // namespace outrider::sim
