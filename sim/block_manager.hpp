#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <unordered_map>
#include <vector>

#include "cluster/kv/kv_event.hpp"

namespace outrider::sim {

using kv::all_blocks_cleared;
using kv::block_removed;
using kv::block_stored;
using kv::cached_block;
using kv::kv_event;

/// The simulated engine's KV cache: a fixed pool of blocks with reference
/// counts and prefix caching. A full block is cached under its hash; when no
/// request uses it any more it moves to an LRU pool where it can be reused by
/// a later request or evicted (BlockRemoved) to make room. Not thread-safe.
class block_manager {
 public:
  block_manager(uint32_t num_blocks, uint32_t block_size);

  uint32_t block_size() const { return block_size_; }
  uint32_t num_blocks() const { return num_blocks_; }
  /// Blocks referenced by at least one request.
  uint32_t used_blocks() const { return used_; }
  /// Blocks that an allocation could get (never used, or cached and idle).
  uint32_t available_blocks() const {
    return static_cast<uint32_t>(free_.size() + lru_.size());
  }

  /// How many leading `hashes` are cached.
  size_t match_prefix(const std::vector<uint64_t>& hashes) const;

  /// Takes a reference on the cached block of each hash (all must be cached)
  /// and returns the block ids.
  std::vector<int32_t> acquire(const std::vector<uint64_t>& hashes);

  /// A fresh block with one reference, evicting the least recently used idle
  /// cached block if needed; nullopt when every block is in use.
  std::optional<int32_t> allocate();

  /// Drops one reference; an idle cached block joins the LRU pool, an idle
  /// uncached block the free list.
  void release(int32_t block);

  /// Marks `block` full: it holds `tokens`, follows `parent`, and is cached
  /// under `hash` unless that hash is cached already. Returns true when it
  /// became the cached copy.
  bool commit(int32_t block, uint64_t hash, std::optional<uint64_t> parent,
              std::vector<uint32_t> tokens, kv::block_identity identity = {});

  /// Forgets every cached hash (prefix-cache reset); blocks in use stay
  /// allocated but uncached. Records AllBlocksCleared.
  void clear();

  /// Events recorded since the last call (evictions, clears), in order.
  std::vector<kv_event> take_events();
  /// Appends an event produced by the caller (stores), keeping the order.
  void record(kv_event ev) { events_.push_back(std::move(ev)); }

  /// Every cached block (ground truth).
  std::vector<cached_block> snapshot() const;

 private:
  struct block {
    uint32_t refs = 0;
    bool cached = false;
    uint64_t hash = 0;
    std::optional<uint64_t> parent;
    std::vector<uint32_t> tokens;
    kv::block_identity identity;
    std::list<int32_t>::iterator lru_pos;
  };

  uint32_t num_blocks_;
  uint32_t block_size_;
  uint32_t used_ = 0;
  std::vector<block> blocks_;
  std::vector<int32_t> free_;                   // never used or uncached
  std::list<int32_t> lru_;                      // idle cached, oldest first
  std::unordered_map<uint64_t, int32_t> index_; // hash -> cached block
  std::vector<kv_event> events_;
};

} // namespace outrider::sim
