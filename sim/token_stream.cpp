#include "sim/token_stream.hpp"

namespace outrider::sim {

uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint32_t next_token(uint64_t context_hash, uint64_t seed, uint32_t vocab) {
  // Token 0 is left out so that a zero never looks like padding.
  return 1 + static_cast<uint32_t>(splitmix(context_hash ^ splitmix(seed)) %
                                   (vocab - 1));
}

uint64_t fold_token(uint64_t context_hash, uint32_t token) {
  return splitmix(context_hash * 0x100000001b3ULL + token);
}

std::vector<uint32_t> continuation(const std::vector<uint32_t>& prompt,
                                   size_t n, uint64_t seed, uint32_t vocab) {
  uint64_t ctx = context_seed;
  for (auto t : prompt)
    ctx = fold_token(ctx, t);
  std::vector<uint32_t> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    auto t = next_token(ctx, seed, vocab);
    out.push_back(t);
    ctx = fold_token(ctx, t);
  }
  return out;
}

} // namespace outrider::sim
