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

void put_str(std::string& out, const std::string& v) {
  put_be(out, v.size(), 4);
  out += v;
}

bool get_str(reader& r, std::string& out) {
  auto n = r.get(4);
  if (!r.ok || static_cast<uint64_t>(r.end - r.p) < n)
    return false;
  out.assign(r.p, n);
  r.p += n;
  return true;
}

void put_opt(std::string& out, std::optional<uint64_t> v, int bytes) {
  out.push_back(v ? 1 : 0);
  put_be(out, v.value_or(0), bytes);
}

template <class T>
bool get_opt(reader& r, std::optional<T>& out, int bytes) {
  bool has = r.get(1) != 0;
  auto v = r.get(bytes);
  if (has)
    out = static_cast<T>(v);
  return r.ok;
}

void put_extra(std::string& out, const kv::block_extra& ex) {
  put_be(out, ex.size(), 4);
  for (const auto& k : ex) {
    out.push_back(static_cast<char>(k.k));
    put_str(out, k.value);
    put_be(out, static_cast<uint64_t>(k.offset), 8);
  }
}

bool get_extra(reader& r, kv::block_extra& out) {
  auto n = r.get(4);
  // Each item takes at least 13 bytes: a count past the rest is corrupt.
  if (!r.ok || static_cast<uint64_t>(r.end - r.p) < n * 13)
    return false;
  for (uint64_t i = 0; i < n; ++i) {
    kv::extra_key k;
    auto kind = r.get(1);
    if (kind > 2 || !get_str(r, k.value))
      return false;
    k.k = static_cast<kv::extra_key::kind>(kind);
    k.offset = static_cast<int64_t>(r.get(8));
    out.push_back(std::move(k));
  }
  return r.ok;
}

// What a store or removal says beyond hashes and tokens (tags 4 and 5).
void put_place(std::string& out, kv::medium m, kv::locality l,
               const std::string& ownership, std::optional<uint32_t> group) {
  out.push_back(static_cast<char>(m));
  out.push_back(static_cast<char>(l));
  put_str(out, ownership);
  put_opt(out, group, 4);
}

bool get_place(reader& r, kv::medium& m, kv::locality& l,
               std::string& ownership, std::optional<uint32_t>& group) {
  auto mv = r.get(1);
  auto lv = r.get(1);
  if (!r.ok || mv >= kv::medium_count || lv > 2)
    return false;
  m = static_cast<kv::medium>(mv);
  l = static_cast<kv::locality>(lv);
  return get_str(r, ownership) && get_opt(r, group, 4);
}

bool plain(const kv::block_stored& s) {
  return !s.lora_id && s.lora_name.empty() && s.medium == kv::medium::gpu &&
         s.extra_keys.empty() && !s.group_idx && s.spec_kind.empty() &&
         !s.sliding_window && s.locality == kv::locality::unspecified &&
         s.ownership.empty() && s.session_id.empty() && s.cache_salt.empty();
}

bool plain(const kv::block_removed& r) {
  return r.medium == kv::medium::gpu && !r.group_idx &&
         r.locality == kv::locality::unspecified && r.ownership.empty();
}

} // namespace

// Log record: per event a tag and fields: 1 stored, 2 removed (GPU, nothing
// beyond hashes and tokens), 3 cleared, 4 stored and 5 removed with every
// field engines add (LoRA, medium, extra keys, group, locality...).
std::string encode_events(const std::vector<kv::kv_event>& events) {
  std::string out;
  for (const auto& ev : events) {
    if (auto* s = std::get_if<kv::block_stored>(&ev)) {
      bool full = !plain(*s);
      out.push_back(full ? 4 : 1);
      put_be(out, s->block_hashes.size(), 4);
      for (auto h : s->block_hashes)
        put_be(out, h, 8);
      out.push_back(s->parent_block_hash ? 1 : 0);
      put_be(out, s->parent_block_hash.value_or(0), 8);
      put_be(out, s->block_size, 4);
      put_tokens(out, s->token_ids);
      if (!full)
        continue;
      put_opt(out,
              s->lora_id
                ? std::optional<uint64_t>(static_cast<uint64_t>(*s->lora_id))
                : std::nullopt,
              8);
      put_str(out, s->lora_name);
      put_place(out, s->medium, s->locality, s->ownership, s->group_idx);
      put_be(out, s->extra_keys.size(), 4);
      for (const auto& ex : s->extra_keys)
        put_extra(out, ex);
      put_str(out, s->spec_kind);
      put_opt(out, s->sliding_window, 4);
      put_str(out, s->session_id);
      put_str(out, s->cache_salt);
    } else if (auto* r = std::get_if<kv::block_removed>(&ev)) {
      bool full = !plain(*r);
      out.push_back(full ? 5 : 2);
      put_be(out, r->block_hashes.size(), 4);
      for (auto h : r->block_hashes)
        put_be(out, h, 8);
      if (full)
        put_place(out, r->medium, r->locality, r->ownership, r->group_idx);
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
    if (tag == 1 || tag == 2 || tag == 4 || tag == 5) {
      auto n = r.get(4);
      if (!r.ok || static_cast<uint64_t>(r.end - r.p) < n * 8)
        return false;
      std::vector<uint64_t> hashes;
      for (uint64_t i = 0; i < n; ++i)
        hashes.push_back(r.get(8));
      if (tag == 2 || tag == 5) {
        kv::block_removed rm;
        rm.block_hashes = std::move(hashes);
        if (tag == 5 &&
            !get_place(r, rm.medium, rm.locality, rm.ownership, rm.group_idx))
          return false;
        out.push_back(std::move(rm));
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
      if (tag == 4) {
        std::optional<uint64_t> lora_id;
        if (!get_opt(r, lora_id, 8) || !get_str(r, s.lora_name) ||
            !get_place(r, s.medium, s.locality, s.ownership, s.group_idx))
          return false;
        if (lora_id)
          s.lora_id = static_cast<int64_t>(*lora_id);
        auto extras = r.get(4);
        if (!r.ok || extras > s.block_hashes.size())
          return false;
        s.extra_keys.resize(extras);
        for (auto& ex : s.extra_keys)
          if (!get_extra(r, ex))
            return false;
        if (!get_str(r, s.spec_kind) || !get_opt(r, s.sliding_window, 4) ||
            !get_str(r, s.session_id) || !get_str(r, s.cache_salt))
          return false;
      }
      out.push_back(std::move(s));
    } else if (tag == 3) {
      out.push_back(kv::all_blocks_cleared{});
    } else {
      return false;
    }
  }
  return r.ok;
}

// Snapshot (key `q`): per block hash, parent flag and value, tokens, LoRA,
// extra keys, and its copies (medium, locality, ownership, group, spec
// kind, count). The first format (key `p`) had no more than tokens:
// its blocks read as GPU copies of the base model.
std::string encode_snapshot(const local_index::rank_map& blocks) {
  std::string out;
  out.reserve(blocks.size() * 112);
  for (const auto& [hash, b] : blocks) {
    put_be(out, hash, 8);
    out.push_back(b.parent ? 1 : 0);
    put_be(out, b.parent.value_or(0), 8);
    put_tokens(out, b.token_ids);
    put_str(out, b.identity.lora);
    put_extra(out, b.identity.extra);
    put_be(out, b.where.size(), 4);
    for (const auto& w : b.where) {
      put_place(out, w.medium, w.locality, w.ownership, w.group_idx);
      put_str(out, w.spec_kind);
      put_be(out, w.copies, 4);
    }
  }
  return out;
}

bool decode_snapshot(std::string_view v, int rank, local_index& index,
                     bool first_format) {
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
    if (first_format) {
      b.where.push_back(residency{});
      b.where.back().copies = 1;
      index.put(rank, hash, std::move(b));
      continue;
    }
    if (!get_str(r, b.identity.lora) || !get_extra(r, b.identity.extra))
      return false;
    auto n = r.get(4);
    // Each copy takes at least 19 bytes; more than 1024 places for one
    // block is corrupt.
    if (!r.ok || n > 1024 || static_cast<uint64_t>(r.end - r.p) < n * 19)
      return false;
    for (uint64_t i = 0; i < n; ++i) {
      residency w;
      if (!get_place(r, w.medium, w.locality, w.ownership, w.group_idx) ||
          !get_str(r, w.spec_kind))
        return false;
      w.copies = static_cast<uint32_t>(r.get(4));
      if (w.copies == 0)
        return false;
      b.where.push_back(std::move(w));
    }
    if (b.where.empty())
      return false;
    index.put(rank, hash, std::move(b));
  }
  return r.ok;
}

} // namespace outrider::indexer::records
