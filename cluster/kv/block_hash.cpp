#include "cluster/kv/block_hash.hpp"

#include <algorithm>
#include <cstring>
// The library's own code, compiled into this file so that a block's two
// short hashes (64 and 16 bytes) are inlined rather than called through
// the shared library: the same function and results (xxhash.h's
// documented XXH_INLINE_ALL mode).
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace outrider::kv {

namespace {

void store_le64(unsigned char* out, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    out[i] = static_cast<unsigned char>(v >> (8 * i));
}

bool little_endian() {
  uint16_t x = 1;
  unsigned char c;
  std::memcpy(&c, &x, 1);
  return c == 1;
}

} // namespace

uint64_t seed_for(std::string_view lora_name, uint64_t base) {
  if (lora_name.empty())
    return base;
  return base ^ XXH3_64bits(lora_name.data(), lora_name.size());
}

uint64_t extra_digest(const block_extra& extra) {
  if (extra.empty())
    return 0;
  std::string buf;
  for (const auto& k : extra) {
    unsigned char head[17];
    head[0] = static_cast<unsigned char>(k.k);
    store_le64(head + 1, k.value.size());
    store_le64(head + 9, static_cast<uint64_t>(k.offset));
    buf.append(reinterpret_cast<const char*>(head), sizeof(head));
    buf += k.value;
  }
  return XXH3_64bits(buf.data(), buf.size());
}

uint64_t block_key(const uint32_t* tokens, size_t block_size,
                   const block_identity& id, std::optional<uint64_t> parent,
                   uint64_t base_seed) {
  auto seed = seed_for(id.lora, base_seed);
  auto local = local_block_hash(tokens, block_size, seed);
  if (!id.extra.empty())
    local = chain_hash(local, extra_digest(id.extra), seed);
  return parent ? chain_hash(*parent, local, seed) : local;
}

std::vector<uint64_t> sequence_keys(const uint32_t* tokens, size_t n,
                                    size_t block_size,
                                    const prompt_identity& id,
                                    uint64_t base_seed) {
  if (id.match_limit)
    n = std::min(n, *id.match_limit);
  if (id.plain())
    return sequence_hashes(tokens, n, block_size, base_seed);
  std::vector<uint64_t> out;
  if (block_size == 0)
    return out;
  out.reserve(n / block_size);
  block_identity bid;
  bid.lora = id.lora;
  for (size_t b = 0; b + block_size <= n; b += block_size) {
    bid.extra.clear();
    for (const auto& m : id.media)
      if (m.offset < b + block_size && m.offset + m.length > b)
        bid.extra.push_back(
          extra_key{extra_key::kind::media, m.identifier,
                    static_cast<int64_t>(m.offset) - static_cast<int64_t>(b)});
    if (b == 0 && !id.cache_salt.empty())
      bid.extra.push_back(extra_key{extra_key::kind::text, id.cache_salt, 0});
    std::optional<uint64_t> parent;
    if (!out.empty())
      parent = out.back();
    out.push_back(block_key(tokens + b, block_size, bid, parent, base_seed));
  }
  return out;
}

uint64_t local_block_hash(const uint32_t* tokens, size_t block_size,
                          uint64_t seed) {
  static const bool le = little_endian();
  if (le)
    return XXH3_64bits_withSeed(tokens, block_size * 4, seed);
  std::vector<unsigned char> buf(block_size * 4);
  for (size_t i = 0; i < block_size; ++i)
    for (int b = 0; b < 4; ++b)
      buf[i * 4 + b] = static_cast<unsigned char>(tokens[i] >> (8 * b));
  return XXH3_64bits_withSeed(buf.data(), buf.size(), seed);
}

uint64_t chain_hash(uint64_t parent_seq, uint64_t local, uint64_t seed) {
  unsigned char buf[16];
  store_le64(buf, parent_seq);
  store_le64(buf + 8, local);
  return XXH3_64bits_withSeed(buf, sizeof(buf), seed);
}

std::vector<uint64_t> sequence_hashes(const uint32_t* tokens, size_t n,
                                      size_t block_size, uint64_t seed) {
  std::vector<uint64_t> out;
  if (block_size == 0)
    return out;
  out.reserve(n / block_size);
  for (size_t b = 0; b + block_size <= n; b += block_size) {
    auto local = local_block_hash(tokens + b, block_size, seed);
    out.push_back(out.empty() ? local : chain_hash(out.back(), local, seed));
  }
  return out;
}

} // namespace outrider::kv
