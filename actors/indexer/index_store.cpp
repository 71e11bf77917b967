#include "actors/indexer/index_store.hpp"

#include <chrono>
#include <cstring>
#include <filesystem>
#include <set>

#include <rocksdb/db.h>
#include <rocksdb/write_batch.h>

namespace outrider::indexer {

namespace {

void put_be(std::string& out, uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i)
    out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// Reads big-endian integers from a value, refusing to run past its end.
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

std::string key(char kind, int rank) {
  std::string k(1, kind);
  put_be(k, static_cast<uint32_t>(rank), 4);
  return k;
}

std::string log_key(int rank, uint64_t seq) {
  auto k = key('l', rank);
  put_be(k, seq, 8);
  return k;
}

void put_tokens(std::string& out, const std::vector<uint32_t>& tokens) {
  put_be(out, tokens.size(), 4);
  for (auto t : tokens)
    put_be(out, t, 4);
}

bool get_tokens(reader& r, std::vector<uint32_t>& out) {
  auto n = r.get(4);
  if (!r.ok || static_cast<uint64_t>(r.end - r.p) < n * 4)
    return false;
  out.reserve(n);
  for (uint64_t i = 0; i < n; ++i)
    out.push_back(static_cast<uint32_t>(r.get(4)));
  return r.ok;
}

// Log record: per event a tag (1 stored, 2 removed, 3 cleared) and fields.
std::string encode_events(const std::vector<kv::kv_event>& events) {
  std::string out;
  for (const auto& ev : events) {
    if (auto* s = std::get_if<kv::block_stored>(&ev)) {
      out.push_back(1);
      put_be(out, s->block_hashes.size(), 4);
      for (auto h : s->block_hashes)
        put_be(out, h, 8);
      out.push_back(s->parent_block_hash ? 1 : 0);
      put_be(out, s->parent_block_hash.value_or(0), 8);
      put_be(out, s->block_size, 4);
      put_tokens(out, s->token_ids);
    } else if (auto* r = std::get_if<kv::block_removed>(&ev)) {
      out.push_back(2);
      put_be(out, r->block_hashes.size(), 4);
      for (auto h : r->block_hashes)
        put_be(out, h, 8);
    } else {
      out.push_back(3);
    }
  }
  return out;
}

// Not inlined: inlined into load(), GCC 12 reports a false
// -Wmaybe-uninitialized inside std::variant's move constructor.
[[gnu::noinline]] bool decode_events(const rocksdb::Slice& v,
                                     std::vector<kv::kv_event>& out) {
  reader r{v.data(), v.data() + v.size()};
  while (r.ok && !r.done()) {
    auto tag = r.get(1);
    if (tag == 1 || tag == 2) {
      auto n = r.get(4);
      if (!r.ok || static_cast<uint64_t>(r.end - r.p) < n * 8)
        return false;
      std::vector<uint64_t> hashes;
      for (uint64_t i = 0; i < n; ++i)
        hashes.push_back(r.get(8));
      if (tag == 2) {
        out.push_back(kv::block_removed{std::move(hashes)});
        continue;
      }
      kv::block_stored s;
      s.block_hashes = std::move(hashes);
      bool has_parent = r.get(1) != 0;
      auto parent = r.get(8);
      if (has_parent)
        s.parent_block_hash = parent;
      s.block_size = static_cast<uint32_t>(r.get(4));
      if (!get_tokens(r, s.token_ids))
        return false;
      out.push_back(std::move(s));
    } else if (tag == 3) {
      out.push_back(kv::all_blocks_cleared{});
    } else {
      return false;
    }
  }
  return r.ok;
}

// Snapshot: per block hash, parent flag and value, tokens.
std::string encode_snapshot(const local_index::rank_map& blocks) {
  std::string out;
  out.reserve(blocks.size() * 96);
  for (const auto& [hash, b] : blocks) {
    put_be(out, hash, 8);
    out.push_back(b.parent ? 1 : 0);
    put_be(out, b.parent.value_or(0), 8);
    put_tokens(out, b.token_ids);
  }
  return out;
}

bool decode_snapshot(const std::string& v, int rank, local_index& index) {
  reader r{v.data(), v.data() + v.size()};
  while (r.ok && !r.done()) {
    block_info b;
    auto hash = r.get(8);
    bool has_parent = r.get(1) != 0;
    auto parent = r.get(8);
    if (has_parent)
      b.parent = parent;
    if (!get_tokens(r, b.token_ids))
      return false;
    index.put(rank, hash, std::move(b));
  }
  return r.ok;
}

// RocksDB statuses become outrider errors here: corruption means the data
// must be rebuilt, anything else is an I/O problem.
caf::error status_error(const rocksdb::Status& s) {
  if (s.ok())
    return {};
  auto what = "rocksdb: " + s.ToString();
  return make_error(s.IsCorruption() ? errc::corrupt_data : errc::io_error,
                    std::move(what));
}

rocksdb::Options store_options(rocksdb::WALRecoveryMode mode) {
  rocksdb::Options opts;
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
  rocksdb::DB* db = nullptr;
  auto s = rocksdb::DB::Open(
    store_options(rocksdb::WALRecoveryMode::kPointInTimeRecovery), dir_, &db);
  if (!s.ok())
    return status_error(s);
  db_.reset(db);
  return {};
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
  return status_error(db_->Flush(rocksdb::FlushOptions{}));
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
  for (it->Seek("p"); readable && it->Valid() && it->key().starts_with("p");
       it->Next()) {
    bool ok = false;
    auto rank = rank_of(ok);
    if (ok && !decode_snapshot(it->value().ToString(), rank, out.index))
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
    if (decode_events(it->value(), events))
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
  return status_error(db_->Write(rocksdb::WriteOptions{}, &batch));
}

caf::error index_store::compact(int rank, const local_index::rank_map& blocks,
                                uint64_t next_seq) {
  rocksdb::WriteBatch batch;
  batch.Put(key('p', rank), encode_snapshot(blocks));
  batch.DeleteRange(log_key(rank, 0), log_key(rank, next_seq));
  return status_error(db_->Write(rocksdb::WriteOptions{}, &batch));
}

caf::error index_store::reset_rank(int rank, uint64_t next_seq) {
  rocksdb::WriteBatch batch;
  batch.DeleteRange(key('l', rank), key('l', rank + 1));
  batch.Delete(key('p', rank));
  batch.Put(key('s', rank), seq_value(next_seq));
  return status_error(db_->Write(rocksdb::WriteOptions{}, &batch));
}

caf::error index_store::reset(const std::string& instance_id) {
  rocksdb::WriteBatch batch;
  for (const char* range : {"l", "p", "s"}) {
    std::string from(range);
    std::string to(1, static_cast<char>(range[0] + 1));
    batch.DeleteRange(from, to);
  }
  batch.Put("instance_id", instance_id);
  return status_error(db_->Write(rocksdb::WriteOptions{}, &batch));
}

} // namespace outrider::indexer
