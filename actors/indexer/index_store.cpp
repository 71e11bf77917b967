#include "actors/indexer/index_store.hpp"

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>

#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/write_batch.h>
#include <spdlog/spdlog.h>

#include "actors/indexer/index_records.hpp"

namespace outrider::indexer {

namespace {

using namespace records;

// RocksDB statuses become outrider errors here: corruption means the data
// must be rebuilt, anything else is an I/O problem.
caf::error status_error(const rocksdb::Status& s) {
  if (s.ok())
    return {};
  auto what = "rocksdb: " + s.ToString();
  return make_error(s.IsCorruption() ? errc::corrupt_data : errc::io_error,
                    std::move(what));
}

// RocksDB's own messages, warnings and worse, go to outrider's log. Its
// default is a LOG file in the data directory, which fails with the disk:
// Debian's RocksDB 7.8 is built with assertions, and its file logger
// asserts (aborting the sidecar) on the write after a failed one.
class store_logger final : public rocksdb::Logger {
 public:
  store_logger() : rocksdb::Logger(rocksdb::InfoLogLevel::WARN_LEVEL) {}
  using rocksdb::Logger::Logv;
  void Logv(const char* format, va_list ap) override {
    Logv(rocksdb::InfoLogLevel::INFO_LEVEL, format, ap);
  }
  void Logv(const rocksdb::InfoLogLevel level, const char* format,
            va_list ap) override {
    if (level < GetInfoLogLevel())
      return;
    char line[1024];
    std::vsnprintf(line, sizeof line, format, ap);
    if (level >= rocksdb::InfoLogLevel::ERROR_LEVEL)
      spdlog::error("rocksdb: {}", line);
    else
      spdlog::warn("rocksdb: {}", line);
  }
};

rocksdb::Options store_options(rocksdb::WALRecoveryMode mode) {
  rocksdb::Options opts;
  opts.info_log = std::make_shared<store_logger>();
  opts.create_if_missing = true;
  opts.paranoid_checks = true;
  opts.wal_recovery_mode = mode;
  opts.IncreaseParallelism(2);
  opts.write_buffer_size = 64 << 20;
  return opts;
}

std::string seq_value(uint64_t next_seq) {
  std::string v;
  put_be(v, next_seq, 8);
  return v;
}

} // namespace

index_store::index_store() = default;
index_store::~index_store() = default;

caf::error index_store::open(const std::string& dir) {
  dir_ = dir;
  db_.reset();
  rocksdb::DB* db = nullptr;
  // Strict first: a damaged log is noticed, not silently cut.
  auto s = rocksdb::DB::Open(
    store_options(rocksdb::WALRecoveryMode::kAbsoluteConsistency), dir, &db);
  if (!s.ok() && s.IsCorruption()) {
    auto strict = s.ToString();
    s = rocksdb::DB::Open(
      store_options(rocksdb::WALRecoveryMode::kPointInTimeRecovery), dir, &db);
    if (s.ok())
      note("wal", "the store's write-ahead log in " + dir + " is damaged (" +
                    strict +
                    "); recovered up to its last consistent record, the "
                    "engine's replay fills in after it");
  }
  if (s.ok()) {
    db_.reset(db);
    return {};
  }
  return open_fresh_aside(s.ToString());
}

// The store cannot be opened or read: keep it for inspection, start empty.
caf::error index_store::open_fresh_aside(const std::string& why) {
  namespace fs = std::filesystem;
  db_.reset();
  std::error_code ec;
  if (fs::exists(dir_, ec)) {
    auto stamp = std::chrono::duration_cast<std::chrono::seconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count();
    auto aside = dir_ + ".broken-" + std::to_string(stamp);
    fs::rename(dir_, aside, ec);
    if (ec)
      return make_error(errc::io_error, "rocksdb: " + why + "; moving " + dir_ +
                                          " aside failed: " + ec.message());
    note("store", "the store in " + dir_ + " is unusable (" + why +
                    "); moved to " + aside +
                    " and starting empty (the index is rebuilt from the "
                    "engine)");
  } else {
    note("store", "the store in " + dir_ + " is unusable (" + why + ")");
  }
  return open_lenient();
}

void index_store::note(std::string kind, std::string message) {
  notes_.push_back({std::move(kind), std::move(message)});
}

std::vector<store_note> index_store::take_notes() {
  std::vector<store_note> out;
  out.swap(notes_);
  return out;
}

caf::error index_store::flush() {
  if (!db_)
    return make_error(errc::io_error, "the store is closed (reopening failed)");
  return status_error(db_->Flush(rocksdb::FlushOptions{}));
}

caf::error index_store::write(rocksdb::WriteBatch& batch) {
  if (!db_)
    return make_error(errc::io_error, "the store is closed (reopening failed)");
  return status_error(db_->Write(rocksdb::WriteOptions{}, &batch));
}

recovered_state index_store::load() {
  recovered_state out;
  std::string id;
  auto got = db_->Get(rocksdb::ReadOptions{}, "instance_id", &id);
  if (got.ok())
    out.instance_id = id;
  std::set<int> bad;
  std::unique_ptr<rocksdb::Iterator> it{db_->NewIterator({})};
  auto rank_of = [&](bool& ok) {
    reader k{it->key().data() + 1, it->key().data() + it->key().size()};
    auto rank = static_cast<int>(k.get(4));
    ok = k.ok;
    return rank;
  };
  for (it->Seek("s"); it->Valid() && it->key().starts_with("s"); it->Next()) {
    bool ok = false;
    auto rank = rank_of(ok);
    reader v{it->value().data(), it->value().data() + it->value().size()};
    auto next = v.get(8);
    if (ok && v.ok && v.done())
      out.next_seq[rank] = next;
    else if (ok)
      bad.insert(rank);
  }
  bool readable = it->status().ok();
  // Snapshots first, then the log after them, in sequence order.
  for (const char* kind : {"p", "q"})
    for (it->Seek(kind); readable && it->Valid() && it->key().starts_with(kind);
         it->Next()) {
      bool ok = false;
      auto rank = rank_of(ok);
      if (ok && !decode_snapshot(
                  std::string_view(it->value().data(), it->value().size()),
                  rank, out.index, *kind == 'p'))
        bad.insert(rank);
    }
  readable = readable && it->status().ok();
  for (it->Seek("l"); readable && it->Valid() && it->key().starts_with("l");
       it->Next()) {
    bool ok = false;
    auto rank = rank_of(ok);
    std::vector<kv::kv_event> events;
    if (!ok)
      continue;
    if (decode_events(std::string_view(it->value().data(), it->value().size()),
                      events))
      out.index.apply(rank, events);
    else
      bad.insert(rank);
  }
  readable = readable && it->status().ok() && (got.ok() || got.IsNotFound());
  if (!readable) {
    auto why = (got.ok() || got.IsNotFound() ? it->status() : got).ToString();
    it.reset();
    return rebuilt(std::move(out.instance_id), why);
  }
  it.reset();
  for (int rank : bad) {
    note("record", "records of rank " + std::to_string(rank) +
                     " failed their checks; the rank is reset and refilled "
                     "from the engine");
    out.index.clear_rank(rank);
    out.next_seq.erase(rank);
    out.corrupt_ranks.push_back(rank);
    if (auto err = reset_rank(rank, 0))
      note("error", describe(err));
  }
  return out;
}

// A read check failed: nothing in the store can be trusted.
recovered_state index_store::rebuilt(std::string instance_id,
                                     const std::string& why) {
  recovered_state out;
  out.rebuilt = true;
  if (auto err = open_fresh_aside(why)) {
    note("error", describe(err));
    return out;
  }
  if (!instance_id.empty()) {
    if (auto err = reset(instance_id))
      note("error", describe(err));
    out.instance_id = std::move(instance_id);
  }
  return out;
}

caf::error index_store::apply(int rank, uint64_t next_seq,
                              const std::vector<kv::kv_event>& events) {
  rocksdb::WriteBatch batch;
  batch.Put(log_key(rank, next_seq - 1), encode_events(events));
  batch.Put(key('s', rank), seq_value(next_seq));
  return write(batch);
}

caf::error index_store::compact(int rank, const local_index::rank_map& blocks,
                                uint64_t next_seq) {
  rocksdb::WriteBatch batch;
  batch.Put(key('q', rank), encode_snapshot(blocks));
  batch.Delete(key('p', rank));
  batch.DeleteRange(log_key(rank, 0), log_key(rank, next_seq));
  return write(batch);
}

caf::error index_store::open_lenient() {
  rocksdb::DB* db = nullptr;
  auto s = rocksdb::DB::Open(
    store_options(rocksdb::WALRecoveryMode::kPointInTimeRecovery), dir_, &db);
  if (!s.ok())
    return status_error(s);
  db_.reset(db);
  return {};
}

caf::error index_store::resume() {
  if (db_ && db_->Resume().ok())
    return {};
  // A failed write to the log is fatal to the open database (Resume
  // refuses): close it and open it again. What the failed writes carried
  // was never applied in memory either; a torn last record is dropped.
  db_.reset();
  return open_lenient();
}

caf::error index_store::reset_rank(int rank, uint64_t next_seq) {
  rocksdb::WriteBatch batch;
  batch.DeleteRange(key('l', rank), key('l', rank + 1));
  batch.Delete(key('p', rank));
  batch.Delete(key('q', rank));
  batch.Put(key('s', rank), seq_value(next_seq));
  return write(batch);
}

caf::error index_store::reset(const std::string& instance_id) {
  rocksdb::WriteBatch batch;
  for (const char* range : {"l", "p", "q", "s"}) {
    std::string from(range);
    std::string to(1, static_cast<char>(range[0] + 1));
    batch.DeleteRange(from, to);
  }
  batch.Put("instance_id", instance_id);
  return write(batch);
}

} // namespace outrider::indexer
