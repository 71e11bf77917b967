#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <optional>
#include <unordered_map>
#include <vector>

#include "cluster/kv/kv_event.hpp"

namespace outrider::sim {

/// A simulated CPU offload tier, as vLLM's OffloadingConnector: every block
/// stored on GPU is written through to it (LRU, `capacity` blocks), and it
/// publishes its own events (medium CPU): self-describing (tokens, parent,
/// adapter, extra keys) or tokenless placeholders, with a locality, and no
/// removals when `store_only` (LMCache). Not thread-safe.
class offload_tier {
 public:
  struct config {
    uint32_t capacity = 0; // 0: no tier
    bool placeholders = false;
    kv::locality locality = kv::locality::unspecified;
    bool store_only = false;
  };

  explicit offload_tier(config cfg) : cfg_(cfg) {}

  /// Copies a GPU store's blocks in; `record` gets the tier's events
  /// (evictions first, then the store), in order.
  void write_through(const kv::block_stored& gpu,
                     const std::function<void(kv::kv_event)>& record);
  /// How many of `hashes`, from `from` on, the tier holds in a row.
  size_t hits(const std::vector<uint64_t>& hashes, size_t from) const;
  /// Appends the tier's copies (ground truth).
  void snapshot(std::vector<kv::cached_block>& out) const;

 private:
  struct copy {
    std::optional<uint64_t> parent;
    std::vector<uint32_t> tokens;
    kv::block_identity identity;
    std::list<uint64_t>::iterator lru_pos;
  };
  config cfg_;
  std::unordered_map<uint64_t, copy> blocks_;
  std::list<uint64_t> lru_; // oldest first
};

} // namespace outrider::sim
