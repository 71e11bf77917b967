#include "sim/kv_encoding.hpp"

#include <cstring>
#include <msgpack.hpp>

namespace outrider::sim {

namespace {

using packer = msgpack::packer<msgpack::sbuffer>;

void pack_str(packer& pk, const std::string& s) {
  pk.pack_str(static_cast<uint32_t>(s.size()));
  pk.pack_str_body(s.data(), static_cast<uint32_t>(s.size()));
}

void pack_hash(packer& pk, uint64_t h, hash_format f) {
  switch (f) {
  case hash_format::uint64:
    pk.pack_uint64(h);
    break;
  case hash_format::int64:
    pk.pack_int64(static_cast<int64_t>(h));
    break;
  case hash_format::bytes: {
    auto b = hash_bytes(h);
    pk.pack_bin(static_cast<uint32_t>(b.size()));
    pk.pack_bin_body(b.data(), static_cast<uint32_t>(b.size()));
    break;
  }
  }
}

void pack_hashes(packer& pk, const std::vector<uint64_t>& hs, hash_format f) {
  pk.pack_array(static_cast<uint32_t>(hs.size()));
  for (auto h : hs)
    pack_hash(pk, h, f);
}

void pack_opt_str(packer& pk, const std::string& s) {
  if (s.empty())
    pk.pack_nil();
  else
    pack_str(pk, s);
}

void pack_extra(packer& pk, const std::vector<kv::block_extra>& extra) {
  pk.pack_array(static_cast<uint32_t>(extra.size()));
  for (const auto& ex : extra) {
    if (ex.empty()) {
      pk.pack_nil();
      continue;
    }
    pk.pack_array(static_cast<uint32_t>(ex.size()));
    for (const auto& k : ex)
      switch (k.k) {
      case kv::extra_key::kind::text:
        pack_str(pk, k.value);
        break;
      case kv::extra_key::kind::media:
        pk.pack_array(2);
        pack_str(pk, k.value);
        pk.pack_int64(k.offset);
        break;
      case kv::extra_key::kind::digest:
        pk.pack_bin(static_cast<uint32_t>(k.value.size()));
        pk.pack_bin_body(k.value.data(), static_cast<uint32_t>(k.value.size()));
        break;
      }
  }
}

// A field of an event: by name in a map, by position in an array.
struct field_writer {
  packer& pk;
  bool map;
  void name(const char* n) {
    if (map)
      pack_str(pk, n);
  }
};

// Field order is vLLM's declaration order (docs/wire.md, "KV events"):
// the fields before `extra_keys` are required and always written; the
// defaulted ones after it are written when set (msgspec's omit_defaults),
// and in the array form up to the last one set, nil before it.
void pack_event(packer& pk, const kv_event& ev, event_encoding enc,
                hash_format f) {
  bool map = enc == event_encoding::map;
  field_writer w{pk, map};
  if (auto* s = std::get_if<block_stored>(&ev)) {
    bool opt[7] = {!s->extra_keys.empty(),
                   s->group_idx.has_value(),
                   !s->spec_kind.empty(),
                   s->sliding_window.has_value(),
                   s->locality != kv::locality::unspecified,
                   !s->ownership.empty(),
                   !s->session_id.empty()};
    size_t last = 0; // optional fields written (array: up to the last set)
    size_t set = 0;
    for (size_t i = 0; i < 7; ++i)
      if (opt[i]) {
        last = i + 1;
        ++set;
      }
    auto n = static_cast<uint32_t>(8 + (map ? set : last));
    if (map)
      pk.pack_map(n);
    else
      pk.pack_array(n);
    w.name("type");
    pack_str(pk, "BlockStored");
    w.name("block_hashes");
    pack_hashes(pk, s->block_hashes, f);
    w.name("parent_block_hash");
    if (s->parent_block_hash)
      pack_hash(pk, *s->parent_block_hash, f);
    else
      pk.pack_nil();
    w.name("token_ids");
    pk.pack_array(static_cast<uint32_t>(s->token_ids.size()));
    for (auto t : s->token_ids)
      pk.pack_uint32(t);
    w.name("block_size");
    pk.pack_uint32(s->block_size);
    w.name("lora_id");
    if (s->lora_id)
      pk.pack_int64(*s->lora_id);
    else
      pk.pack_nil();
    w.name("medium");
    pack_str(pk, kv::to_string(s->medium));
    w.name("lora_name");
    pack_opt_str(pk, s->lora_name);
    auto wanted = [&](size_t i) { return map ? opt[i] : i < last; };
    if (wanted(0)) {
      w.name("extra_keys");
      if (s->extra_keys.empty())
        pk.pack_nil();
      else
        pack_extra(pk, s->extra_keys);
    }
    auto opt_u32 = [&](size_t i, const char* name,
                       const std::optional<uint32_t>& v) {
      if (!wanted(i))
        return;
      w.name(name);
      if (v)
        pk.pack_uint32(*v);
      else
        pk.pack_nil();
    };
    auto opt_s = [&](size_t i, const char* name, const std::string& v) {
      if (!wanted(i))
        return;
      w.name(name);
      pack_opt_str(pk, v);
    };
    opt_u32(1, "group_idx", s->group_idx);
    opt_s(2, "kv_cache_spec_kind", s->spec_kind);
    opt_u32(3, "kv_cache_spec_sliding_window", s->sliding_window);
    opt_s(4, "locality", kv::to_string(s->locality));
    opt_s(5, "ownership", s->ownership);
    opt_s(6, "session_id", s->session_id);
  } else if (auto* r = std::get_if<block_removed>(&ev)) {
    bool opt[3] = {r->group_idx.has_value(),
                   r->locality != kv::locality::unspecified,
                   !r->ownership.empty()};
    size_t last = 0, set = 0;
    for (size_t i = 0; i < 3; ++i)
      if (opt[i]) {
        last = i + 1;
        ++set;
      }
    auto n = static_cast<uint32_t>(3 + (map ? set : last));
    if (map)
      pk.pack_map(n);
    else
      pk.pack_array(n);
    w.name("type");
    pack_str(pk, "BlockRemoved");
    w.name("block_hashes");
    pack_hashes(pk, r->block_hashes, f);
    w.name("medium");
    pack_str(pk, kv::to_string(r->medium));
    auto wanted = [&](size_t i) { return map ? opt[i] : i < last; };
    if (wanted(0)) {
      w.name("group_idx");
      if (r->group_idx)
        pk.pack_uint32(*r->group_idx);
      else
        pk.pack_nil();
    }
    if (wanted(1)) {
      w.name("locality");
      pack_opt_str(pk, kv::to_string(r->locality));
    }
    if (wanted(2)) {
      w.name("ownership");
      pack_opt_str(pk, r->ownership);
    }
  } else {
    if (map)
      pk.pack_map(1);
    else
      pk.pack_array(1);
    w.name("type");
    pack_str(pk, "AllBlocksCleared");
  }
}

} // namespace

std::string hash_bytes(uint64_t hash) {
  std::string out(32, '\0');
  uint64_t x = hash;
  for (size_t i = 0; i < 32; ++i) {
    out[i] = static_cast<char>(x >> (8 * (i % 8)));
    if (i % 8 == 7)
      x = x * 0x9e3779b97f4a7c15ULL + 1;
  }
  return out;
}

std::string encode_batch(double ts, const std::vector<kv_event>& events,
                         std::optional<int> dp_rank, event_encoding enc,
                         hash_format hashes) {
  msgpack::sbuffer buf;
  packer pk{buf};
  pk.pack_array(3);
  // Always a float64 (0xcb), as engines send it: msgpack-c would pack a
  // whole-valued double as an integer.
  uint64_t bits;
  std::memcpy(&bits, &ts, sizeof(bits));
  char f64[9];
  f64[0] = static_cast<char>(0xcb);
  for (int i = 0; i < 8; ++i)
    f64[8 - i] = static_cast<char>((bits >> (8 * i)) & 0xff);
  buf.write(f64, sizeof(f64));
  pk.pack_array(static_cast<uint32_t>(events.size()));
  for (const auto& ev : events)
    pack_event(pk, ev, enc, hashes);
  if (dp_rank)
    pk.pack_int32(*dp_rank);
  else
    pk.pack_nil();
  return std::string(buf.data(), buf.size());
}

std::vector<kv_event> as_hybrid_groups(std::vector<kv_event> events,
                                       uint32_t block_size) {
  std::vector<kv_event> out;
  out.reserve(events.size() * 2);
  for (auto& ev : events) {
    if (auto* s = std::get_if<block_stored>(&ev)) {
      s->group_idx = 0;
      s->spec_kind = "full_attention";
      bool gpu = s->medium == kv::medium::gpu;
      auto window = *s;
      out.push_back(std::move(ev));
      if (gpu) {
        window.group_idx = 1;
        window.spec_kind = "sliding_window";
        window.sliding_window = 4 * block_size;
        out.push_back(std::move(window));
      }
    } else if (auto* r = std::get_if<block_removed>(&ev)) {
      r->group_idx = 0;
      auto window = *r;
      bool gpu = r->medium == kv::medium::gpu;
      out.push_back(std::move(ev));
      if (gpu) {
        window.group_idx = 1;
        out.push_back(std::move(window));
      }
    } else {
      out.push_back(std::move(ev));
    }
  }
  return out;
}

} // namespace outrider::sim
