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
class WriteBatch;
} // namespace rocksdb

namespace outrider::indexer {

/// What a restarted sidecar recovers.
struct recovered_state {
  std::string instance_id;
  std::map<int, uint64_t> next_seq; // per rank: the next sequence expected
  local_index index;
  /// Ranks whose records failed their checks: reset (sequence 0, nothing
  /// kept), so the engine's replay or the gap policy refills them.
  std::vector<int> corrupt_ranks;
  /// The store itself failed a read check: it was set aside and every rank
  /// starts from sequence 0 (the instance id is kept when it was readable).
  bool rebuilt = false;
};

/// Damage the store found and repaired, for the caller to log and count:
/// kind `wal` (log cut at its last good record), `store` (moved aside and
/// started empty), `record` (a rank's records failed their checks: reset),
/// `error` (a repair itself failed).
struct store_note {
  std::string kind;
  std::string message;
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
  /// Opens (creating) the database in `dir`. A store that cannot be opened
  /// (garbage MANIFEST or CURRENT, `dir` a file, ...) is moved aside to
  /// `dir.broken-<time>` (kept for inspection) and a new, empty one opened:
  /// the index is rebuildable from the engine, a restart loop is not. A
  /// damaged write-ahead log is recovered up to its last consistent record
  /// (data and sequence numbers are written in one batch, so they stay in
  /// step). Errors: `io_error` (not even a new
  /// store can be made). Each repair leaves a note (`take_notes`).
  caf::error open(const std::string& dir);

  /// Loads everything, checking every iterator and record; see
  /// `recovered_state` for what corruption does.
  recovered_state load();

  /// Writes the memtable to files (tests; a clean stop).
  caf::error flush();

  /// What `open` and `load` found and repaired since the last call.
  std::vector<store_note> take_notes();

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
  /// After a failed write (a full disk): asks RocksDB to leave the
  /// read-only state its background error put it in. An error while the
  /// cause lasts.
  caf::error resume();

 private:
  /// Opens `dir_` recovering the log up to its last consistent record.
  caf::error open_lenient();
  /// A write of `batch`; `io_error` while the store is closed.
  caf::error write(rocksdb::WriteBatch& batch);
  caf::error open_fresh_aside(const std::string& why);
  recovered_state rebuilt(std::string instance_id, const std::string& why);
  void note(std::string kind, std::string message);
  std::string dir_;
  std::unique_ptr<rocksdb::DB> db_;
  std::vector<store_note> notes_;
};

} // namespace outrider::indexer
