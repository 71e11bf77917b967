// The store's record formats (index_store.hpp): hand-written big-endian
// layouts, small and stable; every decoder refuses to read past its input.
#include "actors/indexer/index_records.hpp"

namespace outrider::indexer::records {

void put_be(std::string& out, uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i)
    out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

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

namespace {

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

} // namespace

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

// Not inlined: inlined into its caller, GCC 12 reports a false
// -Wmaybe-uninitialized inside std::variant's move constructor.
[[gnu::noinline]] bool decode_events(std::string_view v,
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

bool decode_snapshot(std::string_view v, int rank, local_index& index) {
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

} // namespace outrider::indexer::records
