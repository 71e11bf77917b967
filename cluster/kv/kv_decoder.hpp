#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cluster/kv/kv_event.hpp"

namespace outrider::kv {

/// Why a frame or an event was rejected; each reason is a metric label.
enum class kv_reject {
  malformed_msgpack,    // not one complete msgpack value
  bad_batch,            // not [ts, events, dp_rank]
  bad_event,            // an event of the wrong shape or field types
  unknown_event_type,   // a tag we do not know
  token_count_mismatch, // token_ids != len(block_hashes) * block_size
  too_many_events,      // more events in one batch than allowed
};

/// The most events one batch may carry unless the caller says otherwise
/// (`--kv-max-batch-events`).
inline constexpr size_t default_max_batch_events = 65536;

const char* to_string(kv_reject r);

/// One decoded `[ts, events, dp_rank]` batch.
struct decoded_batch {
  double timestamp = 0;
  std::optional<int64_t> dp_rank;
  std::vector<kv::kv_event> events;
  /// Events left out of `events`, with the reason (the rest still apply).
  std::vector<kv_reject> rejected;
};

struct decode_result {
  bool ok = false;
  decoded_batch batch;
  kv_reject error = kv_reject::malformed_msgpack; // when !ok
  std::string detail;                             // when !ok
};

/// Decodes a KV event payload in either encoding (tagged maps or tagged
/// positional arrays, docs/wire.md, "KV events"). Never trusts the input: every
/// type is checked before use, and nothing here throws. A batch with more than
/// `max_events` events is rejected whole
/// (`too_many_events`) before any is decoded.
decode_result decode_kv_batch(const void* data, size_t size,
                              size_t max_events = default_max_batch_events);

/// Folds a raw-bytes block hash (e.g. a 32-byte digest) to 64 bits.
uint64_t fold_hash_bytes(const void* data, size_t size);

} // namespace outrider::kv
