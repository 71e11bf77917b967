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

/// Initial metadata of an outrider sidecar's SubscribeKvEvents stream with
/// a snapshot: its event hub's epoch, the position (over all ranks) the
/// snapshot holds, and how many batches (one per rank) the snapshot is.
/// A follower of the NATS event plane resumes from there.
inline constexpr const char* kv_epoch_key = "outrider-kv-epoch";
inline constexpr const char* kv_position_key = "outrider-kv-position";
inline constexpr const char* kv_batches_key = "outrider-kv-snapshot-batches";

} // namespace outrider::kv
