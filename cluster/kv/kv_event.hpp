#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace outrider::kv {

/// The KV cache events of WIRE.md section 2, shared by the simulated engine
/// (which emits them) and outrider (which decodes and indexes them). Block
/// hashes are the engine's opaque keys, folded to 64 bits.

/// Newly cached full blocks of one request step, in sequence order.
struct block_stored {
  std::vector<uint64_t> block_hashes;
  std::optional<uint64_t> parent_block_hash; // nullopt at the root
  std::vector<uint32_t> token_ids;           // block_size per hash
  uint32_t block_size = 0;
};

/// Blocks evicted from the cache.
struct block_removed {
  std::vector<uint64_t> block_hashes;
};

/// Every cached block of the rank is gone (prefix-cache reset).
struct all_blocks_cleared {};

using kv_event = std::variant<block_stored, block_removed, all_blocks_cleared>;

/// One cached block as the engine knows it (ground truth for tests).
struct cached_block {
  uint64_t hash = 0;
  std::optional<uint64_t> parent;
  std::vector<uint32_t> token_ids;
};

/// Cached blocks as one store each, every block after its parent when the
/// parent is among them (a snapshot that can be applied in order). Linear.
std::vector<kv_event> stores_parents_first(std::vector<cached_block> blocks);

} // namespace outrider::kv
