#pragma once

#include <cstdint>
#include <optional>

#include "cluster/kv/kv_event.hpp"
#include "openengine.pb.h"

namespace outrider::kv {

/// KV events as OpenEngine messages (SubscribeKvEvents), both ways. Hashes
/// travel as 8 big-endian bytes with encoding "uint64".
openengine::v1::KvBlockHash to_proto_hash(uint64_t h);
void to_proto(const kv_event& ev, openengine::v1::KvEvent* out);

/// Decodes one event; nullopt when it is malformed (e.g. a hash that is not
/// 8 bytes of "uint64"/"int64", or token ids that do not fill the blocks).
std::optional<kv_event> from_proto(const openengine::v1::KvEvent& ev);

} // namespace outrider::kv
