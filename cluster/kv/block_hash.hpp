#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/kv/kv_event.hpp"

namespace outrider::kv {

/// The router's block hash (docs/wire.md, "The router's block key"; compatible
/// with Dynamo's KV router): XXH3-64 with seed 1337 over each full block's
/// tokens as 4-byte little-endian integers; the partial tail is dropped.
inline constexpr uint64_t block_hash_seed = 1337;

/// The seed for a LoRA adapter: different adapters never share blocks.
uint64_t seed_for(std::string_view lora_name, uint64_t base = block_hash_seed);

/// XXH3-64 of a block's extra keys (kind, length-prefixed value, offset of
/// each item, in order); 0 for none.
uint64_t extra_digest(const block_extra& extra);

/// The router's key of one block: its tokens hashed under the adapter's
/// seed, the extra keys' digest chained on when there are any, chained onto
/// the parent's key (none at the root). Blocks equal in tokens but not in
/// adapter, salt or media get different keys, and so does every block
/// after them.
uint64_t block_key(const uint32_t* tokens, size_t block_size,
                   const block_identity& id, std::optional<uint64_t> parent,
                   uint64_t base_seed = block_hash_seed);

/// A media item of a prompt: its identifier (vLLM's mm hash or the
/// client's uuid) and the tokens its placeholder spans.
struct media_span {
  std::string identifier;
  uint64_t offset = 0;
  uint64_t length = 0;
};

/// What a request adds to its tokens, as engines key its blocks: the
/// adapter, the tenant salt (first block) and media items (each block they
/// overlap gets (identifier, item start - block start)), in vLLM's order
/// (media, then salt).
struct prompt_identity {
  std::string lora;
  std::string cache_salt;
  std::vector<media_span> media; // by offset
  /// Tokens from here on are not keyed: a media item whose expansion on
  /// the engine the router cannot know begins here, and no block at or
  /// past it may match (a false match is worse than none).
  std::optional<size_t> match_limit;
  bool plain() const {
    return lora.empty() && cache_salt.empty() && media.empty();
  }
};

/// The router keys of every full block of a prompt with its identity.
std::vector<uint64_t> sequence_keys(const uint32_t* tokens, size_t n,
                                    size_t block_size,
                                    const prompt_identity& id,
                                    uint64_t base_seed = block_hash_seed);

/// Local hash of one block of `block_size` tokens.
uint64_t local_block_hash(const uint32_t* tokens, size_t block_size,
                          uint64_t seed = block_hash_seed);

/// Chains a block onto its parent: XXH3-64(seed) of le(parent) || le(local).
uint64_t chain_hash(uint64_t parent_seq, uint64_t local,
                    uint64_t seed = block_hash_seed);

/// Sequence hashes of every full block of `tokens`: seq[0] = local[0],
/// seq[i] = chain_hash(seq[i-1], local[i]).
std::vector<uint64_t> sequence_hashes(const uint32_t* tokens, size_t n,
                                      size_t block_size,
                                      uint64_t seed = block_hash_seed);

} // namespace outrider::kv
