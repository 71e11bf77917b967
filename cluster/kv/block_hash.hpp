#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace outrider::kv {

/// The router's block hash (WIRE.md section 5, compatible with Dynamo's KV
/// router): XXH3-64 with seed 1337 over each full block's tokens as 4-byte
/// little-endian integers; the partial tail is dropped.
inline constexpr uint64_t block_hash_seed = 1337;

/// The seed for a LoRA adapter: different adapters never share blocks.
uint64_t seed_for(std::string_view lora_name);

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
