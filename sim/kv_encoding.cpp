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

// Field order is the declaration order of WIRE.md; maps carry the same
// fields by name.
void pack_event(packer& pk, const kv_event& ev, event_encoding enc,
                hash_format f) {
  bool map = enc == event_encoding::map;
  if (auto* s = std::get_if<block_stored>(&ev)) {
    if (map) {
      pk.pack_map(8);
      pack_str(pk, "type");
    } else {
      pk.pack_array(8);
    }
    pack_str(pk, "BlockStored");
    if (map)
      pack_str(pk, "block_hashes");
    pack_hashes(pk, s->block_hashes, f);
    if (map)
      pack_str(pk, "parent_block_hash");
    if (s->parent_block_hash)
      pack_hash(pk, *s->parent_block_hash, f);
    else
      pk.pack_nil();
    if (map)
      pack_str(pk, "token_ids");
    pk.pack_array(static_cast<uint32_t>(s->token_ids.size()));
    for (auto t : s->token_ids)
      pk.pack_uint32(t);
    if (map)
      pack_str(pk, "block_size");
    pk.pack_uint32(s->block_size);
    if (map)
      pack_str(pk, "lora_id");
    pk.pack_nil();
    if (map)
      pack_str(pk, "medium");
    pack_str(pk, "GPU");
    if (map)
      pack_str(pk, "lora_name");
    pk.pack_nil();
  } else if (auto* r = std::get_if<block_removed>(&ev)) {
    if (map) {
      pk.pack_map(3);
      pack_str(pk, "type");
    } else {
      pk.pack_array(3);
    }
    pack_str(pk, "BlockRemoved");
    if (map)
      pack_str(pk, "block_hashes");
    pack_hashes(pk, r->block_hashes, f);
    if (map)
      pack_str(pk, "medium");
    pack_str(pk, "GPU");
  } else {
    if (map) {
      pk.pack_map(1);
      pack_str(pk, "type");
    } else {
      pk.pack_array(1);
    }
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

} // namespace outrider::sim
