#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "actors/indexer/local_index.hpp"
#include "cluster/kv/kv_event.hpp"
#include "runtime/errors.hpp"

namespace rocksdb {
class DB;
}

namespace outrider::indexer {

/// What a restarted sidecar recovers.
struct recovered_state {
  std::string instance_id;
  std::map<int, uint64_t> next_seq; // per rank: the next sequence expected
  local_index index;
};

/// The sidecar's durable index in RocksDB, as a log plus snapshots:
/// - each applied batch is one log record (`l` rank seq -> the events) written
///   atomically with the rank's next sequence number (`s` rank);
/// - `compact` writes a rank's whole index as one snapshot value (`p` rank)
///   and drops the log records it covers.
/// One write per batch keeps the hot path cheap (bench/kv_apply); recovery
/// is the snapshot plus the log after it. A killed process loses nothing it
/// wrote (RocksDB's write-ahead log).
class index_store {
 public:
  index_store();
  ~index_store();
  index_store(const index_store&) = delete;
  index_store& operator=(const index_store&) = delete;
  /// Opens (creating) the database in `dir`. Errors: `corrupt_data` (the
  /// files fail RocksDB's checks), `io_error`.
  caf::error open(const std::string& dir);

  /// Loads everything.
  recovered_state load() const;

  /// Records the effect of one batch and the rank's next sequence number.
  caf::error apply(int rank, uint64_t next_seq,
                   const std::vector<kv::kv_event>& events);
  /// Forgets every block of `rank` (a reset) and sets its next sequence.
  caf::error reset_rank(int rank, uint64_t next_seq);
  /// Forgets everything and starts over for a new engine instance.
  caf::error reset(const std::string& instance_id);
  /// Writes `blocks` (the rank's whole index at `next_seq`) as its snapshot
  /// and drops the log before it.
  caf::error compact(int rank, const local_index::rank_map& blocks,
                     uint64_t next_seq);

 private:
  std::unique_ptr<rocksdb::DB> db_;
};

} // namespace outrider::indexer
