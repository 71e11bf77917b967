#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cluster/kv/kv_event.hpp"

namespace outrider::sim {

using kv::all_blocks_cleared;
using kv::block_removed;
using kv::block_stored;
using kv::cached_block;
using kv::kv_event;

/// How events are laid out: tagged maps (current engines) or tagged
/// positional arrays (older engines). docs/wire.md, "KV events".
enum class event_encoding { map, array };

/// How block hashes go on the wire: uint64 (vLLM), int64 (SGLang), or 32
/// raw bytes (vLLM without integer hashes).
enum class hash_format { uint64, int64, bytes };

/// Encodes one batch `[ts, events, dp_rank]` as msgpack.
std::string encode_batch(double ts, const std::vector<kv_event>& events,
                         std::optional<int> dp_rank, event_encoding enc,
                         hash_format hashes = hash_format::uint64);

/// Events as a hybrid model's engine publishes them (vLLM): each GPU store
/// and removal for group 0 (full attention) and again for group 1 (sliding
/// window, same hashes); offload events for group 0 only.
std::vector<kv_event> as_hybrid_groups(std::vector<kv_event> events,
                                       uint32_t block_size);

/// The 32 bytes that stand for `hash` in `hash_format::bytes`.
std::string hash_bytes(uint64_t hash);

} // namespace outrider::sim
