#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "actors/indexer/local_index.hpp"
#include "cluster/kv_event.hpp"

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

/// The sidecar's durable index in RocksDB: one key per block
/// (`b` rank hash -> parent, tokens) and per-rank sequence numbers, written
/// together in one atomic batch per applied event batch. The database is the
/// snapshot; RocksDB's log and compaction keep it small and crash-safe (a
/// killed process loses nothing it wrote).
class index_store {
 public:
  index_store();
  ~index_store();
  index_store(const index_store&) = delete;
  index_store& operator=(const index_store&) = delete;
  /// Opens (creating) the database in `dir`; error text or empty.
  std::string open(const std::string& dir);

  /// Loads everything.
  recovered_state load() const;

  /// Records the effect of one batch and the rank's next sequence number.
  std::string apply(int rank, uint64_t next_seq,
                    const std::vector<kv::kv_event>& events);
  /// Forgets every block of `rank` (a reset) and sets its next sequence.
  std::string reset_rank(int rank, uint64_t next_seq);
  /// Forgets everything and starts over for a new engine instance.
  std::string reset(const std::string& instance_id);

 private:
  std::unique_ptr<rocksdb::DB> db_;
};

} // namespace outrider::indexer
