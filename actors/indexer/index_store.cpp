#include "actors/indexer/index_store.hpp"

#include <cstring>

#include <rocksdb/db.h>
#include <rocksdb/write_batch.h>

namespace outrider::indexer {

namespace {

void put_be(std::string& out, uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i)
    out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t get_be(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i)
    v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

std::string block_prefix(int rank) {
  std::string k = "b";
  put_be(k, static_cast<uint32_t>(rank), 4);
  return k;
}

std::string block_key(int rank, uint64_t hash) {
  auto k = block_prefix(rank);
  put_be(k, hash, 8);
  return k;
}

std::string seq_key(int rank) {
  std::string k = "s";
  put_be(k, static_cast<uint32_t>(rank), 4);
  return k;
}

// [has_parent(1) parent(8)] tokens(4 each, big-endian)
std::string encode_block(const block_info& b) {
  std::string v;
  v.reserve(9 + 4 * b.token_ids.size());
  v.push_back(b.parent ? 1 : 0);
  put_be(v, b.parent.value_or(0), 8);
  for (auto t : b.token_ids)
    put_be(v, t, 4);
  return v;
}

bool decode_block(const rocksdb::Slice& v, block_info& out) {
  if (v.size() < 9 || (v.size() - 9) % 4 != 0)
    return false;
  if (v.data()[0])
    out.parent = get_be(v.data() + 1, 8);
  for (size_t off = 9; off < v.size(); off += 4)
    out.token_ids.push_back(static_cast<uint32_t>(get_be(v.data() + off, 4)));
  return true;
}

std::string status_text(const rocksdb::Status& s) {
  return s.ok() ? std::string{} : "rocksdb: " + s.ToString();
}

} // namespace

index_store::index_store() = default;
index_store::~index_store() = default;

std::string index_store::open(const std::string& dir) {
  rocksdb::Options opts;
  opts.create_if_missing = true;
  opts.IncreaseParallelism(2);
  rocksdb::DB* db = nullptr;
  auto s = rocksdb::DB::Open(opts, dir, &db);
  if (!s.ok())
    return status_text(s);
  db_.reset(db);
  return {};
}

recovered_state index_store::load() const {
  recovered_state out;
  std::string id;
  if (db_->Get(rocksdb::ReadOptions{}, "instance_id", &id).ok())
    out.instance_id = id;
  std::unique_ptr<rocksdb::Iterator> it{db_->NewIterator({})};
  for (it->Seek("s"); it->Valid() && it->key().starts_with("s"); it->Next()) {
    if (it->key().size() != 5 || it->value().size() != 8)
      continue;
    out.next_seq[static_cast<int>(get_be(it->key().data() + 1, 4))] =
      get_be(it->value().data(), 8);
  }
  for (it->Seek("b"); it->Valid() && it->key().starts_with("b"); it->Next()) {
    if (it->key().size() != 13)
      continue;
    block_info b;
    if (!decode_block(it->value(), b))
      continue;
    out.index.put(static_cast<int>(get_be(it->key().data() + 1, 4)),
                  get_be(it->key().data() + 5, 8), std::move(b));
  }
  return out;
}

std::string index_store::apply(int rank, uint64_t next_seq,
                               const std::vector<kv::kv_event>& events) {
  rocksdb::WriteBatch batch;
  for (const auto& ev : events) {
    if (auto* s = std::get_if<kv::block_stored>(&ev)) {
      auto parent = s->parent_block_hash;
      for (size_t i = 0; i < s->block_hashes.size(); ++i) {
        auto first =
          s->token_ids.begin() + static_cast<ptrdiff_t>(i * s->block_size);
        block_info b{parent, {first, first + s->block_size}};
        batch.Put(block_key(rank, s->block_hashes[i]), encode_block(b));
        parent = s->block_hashes[i];
      }
    } else if (auto* r = std::get_if<kv::block_removed>(&ev)) {
      for (auto h : r->block_hashes)
        batch.Delete(block_key(rank, h));
    } else {
      auto from = block_prefix(rank);
      auto to = block_prefix(rank + 1);
      batch.DeleteRange(from, to);
    }
  }
  std::string seq;
  put_be(seq, next_seq, 8);
  batch.Put(seq_key(rank), seq);
  return status_text(db_->Write(rocksdb::WriteOptions{}, &batch));
}

std::string index_store::reset_rank(int rank, uint64_t next_seq) {
  rocksdb::WriteBatch batch;
  batch.DeleteRange(block_prefix(rank), block_prefix(rank + 1));
  std::string seq;
  put_be(seq, next_seq, 8);
  batch.Put(seq_key(rank), seq);
  return status_text(db_->Write(rocksdb::WriteOptions{}, &batch));
}

std::string index_store::reset(const std::string& instance_id) {
  rocksdb::WriteBatch batch;
  batch.DeleteRange("b", "c");
  batch.DeleteRange("s", "t");
  batch.Put("instance_id", instance_id);
  return status_text(db_->Write(rocksdb::WriteOptions{}, &batch));
}

} // namespace outrider::indexer
