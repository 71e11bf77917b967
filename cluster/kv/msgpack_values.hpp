#pragma once

// Typed readers of msgpack values for the KV event decoder: each checks the
// type before use and says false (or nullopt) on anything else. Optional
// fields take a pointer: null or nil is "not given".

#include <cstdint>
#include <msgpack.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/kv/kv_event.hpp"

namespace outrider::kv::mp {

using msgpack::object;

std::string_view str(const object& o);

bool is_str(const object& o, std::string_view s);

std::optional<uint64_t> as_hash(const object& o);

bool as_hashes(const object& o, std::vector<uint64_t>& out);

/// Token ids, or SGLang's EAGLE bigrams `[token, next]` (the first is the
/// block's token).
bool as_tokens(const object& o, std::vector<uint32_t>& out);

/// An optional string: nil or absent is "", anything else not a string fails.
bool opt_str(const object* o, std::string& out);

bool opt_u32(const object* o, std::optional<uint32_t>& out);

bool opt_i64(const object* o, std::optional<int64_t>& out);

/// A medium name; one not known counts as storage (credited least).
bool opt_medium(const object* o, kv::medium& out);

bool opt_locality(const object* o, kv::locality& out);

/// One item of a block's extra keys: str, [identifier, offset], or bin.
bool as_extra_item(const object& o, kv::extra_key& out);

/// extra_keys: nil, or one entry (nil or a list of items) per block hash.
bool opt_extra_keys(const object* o, size_t blocks,
                    std::vector<kv::block_extra>& out);

} // namespace outrider::kv::mp
