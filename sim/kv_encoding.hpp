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
/// positional arrays (older engines). WIRE.md section 2.
enum class event_encoding { map, array };

/// How block hashes go on the wire: uint64 (vLLM), int64 (SGLang), or 32
/// raw bytes (vLLM without integer hashes).
enum class hash_format { uint64, int64, bytes };

/// Encodes one batch `[ts, events, dp_rank]` as msgpack.
std::string encode_batch(double ts, const std::vector<kv_event>& events,
                         std::optional<int> dp_rank, event_encoding enc,
                         hash_format hashes = hash_format::uint64);

/// The 32 bytes that stand for `hash` in `hash_format::bytes`.
std::string hash_bytes(uint64_t hash);

} // namespace outrider::sim
