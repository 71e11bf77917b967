#pragma once

// The records of the sidecar's store (actors/indexer/index_store.cpp), as a
// codec of their own so they can be unit-tested and fuzzed without RocksDB.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "actors/indexer/local_index.hpp"
#include "cluster/kv/kv_event.hpp"

namespace outrider::indexer::records {

void put_be(std::string& out, uint64_t v, int bytes);

/// Reads big-endian integers from a value, refusing to run past its end.
struct reader {
  const char* p;
  const char* end;
  bool ok = true;
  uint64_t get(int bytes) {
    if (end - p < bytes) {
      ok = false;
      return 0;
    }
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i)
      v = (v << 8) | static_cast<unsigned char>(*p++);
    return v;
  }
  bool done() const { return p == end; }
};

/// `kind` then the rank (4 bytes): the sequence (`s`), snapshot (`q`; `p`
/// in the first layout) and log (`l`) key prefixes.
std::string key(char kind, int rank);
/// The log record of batch `seq` of `rank`.
std::string log_key(int rank, uint64_t seq);

/// A log record: the events of one batch.
std::string encode_events(const std::vector<kv::kv_event>& events);
/// False when `v` is not a whole, well-formed log record.
bool decode_events(std::string_view v, std::vector<kv::kv_event>& out);

/// A snapshot record: a rank's whole index.
std::string encode_snapshot(const local_index::rank_map& blocks);
/// Adds the snapshot's blocks to `index` under `rank`; false when `v` is
/// not well-formed (some blocks may have been added). `first_format`: a
/// record of the first layout (key `p`, tokens only).
bool decode_snapshot(std::string_view v, int rank, local_index& index,
                     bool first_format = false);

} // namespace outrider::indexer::records
