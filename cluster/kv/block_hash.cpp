#include "cluster/kv/block_hash.hpp"

#include <cstring>
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

uint64_t seed_for(std::string_view lora_name) {
  if (lora_name.empty())
    return block_hash_seed;
  return block_hash_seed ^ XXH3_64bits(lora_name.data(), lora_name.size());
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
