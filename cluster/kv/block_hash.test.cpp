#include "cluster/kv/block_hash.hpp"

#include <xxhash.h>

#include <catch2/catch.hpp>

using namespace outrider::kv;

namespace {

// docs/wire.md ("The router's block key") transcribed byte by byte, as a
// reference.
uint64_t reference_local(const std::vector<uint32_t>& block) {
  std::vector<unsigned char> bytes;
  for (auto t : block)
    for (int b = 0; b < 4; ++b)
      bytes.push_back(static_cast<unsigned char>((t >> (8 * b)) & 0xff));
  return XXH3_64bits_withSeed(bytes.data(), bytes.size(), 1337);
}

uint64_t reference_chain(uint64_t parent, uint64_t local) {
  unsigned char bytes[16];
  for (int b = 0; b < 8; ++b) {
    bytes[b] = static_cast<unsigned char>((parent >> (8 * b)) & 0xff);
    bytes[8 + b] = static_cast<unsigned char>((local >> (8 * b)) & 0xff);
  }
  return XXH3_64bits_withSeed(bytes, 16, 1337);
}

} // namespace

TEST_CASE("block hashes follow docs/wire.md, the router's block key") {
  std::vector<uint32_t> tokens;
  for (uint32_t i = 0; i < 10; ++i)
    tokens.push_back(i * 1000003u + 7);
  auto seq = sequence_hashes(tokens.data(), tokens.size(), 4);
  REQUIRE(seq.size() == 2); // the partial tail of 2 tokens is dropped
  auto l0 = reference_local({tokens[0], tokens[1], tokens[2], tokens[3]});
  auto l1 = reference_local({tokens[4], tokens[5], tokens[6], tokens[7]});
  CHECK(seq[0] == l0);
  CHECK(seq[1] == reference_chain(l0, l1));
  CHECK(local_block_hash(tokens.data(), 4) == l0);
  // Fixed vector: the tokens 0..15 in one block.
  std::vector<uint32_t> iota(16);
  for (uint32_t i = 0; i < 16; ++i)
    iota[i] = i;
  CHECK(local_block_hash(iota.data(), 16) == reference_local(iota));
}

TEST_CASE("equal prefixes hash alike, different ones do not") {
  std::vector<uint32_t> a{1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<uint32_t> b{1, 2, 3, 4, 9, 9, 9, 9};
  auto ha = sequence_hashes(a.data(), a.size(), 4);
  auto hb = sequence_hashes(b.data(), b.size(), 4);
  CHECK(ha[0] == hb[0]);
  CHECK(ha[1] != hb[1]);
  // The same block under another parent is another sequence hash.
  std::vector<uint32_t> c{9, 9, 9, 9, 5, 6, 7, 8};
  CHECK(sequence_hashes(c.data(), c.size(), 4)[1] != ha[1]);
}

TEST_CASE("LoRA adapters never share blocks") {
  std::vector<uint32_t> t{1, 2, 3, 4};
  CHECK(seed_for("") == block_hash_seed);
  auto base = sequence_hashes(t.data(), t.size(), 4, seed_for(""));
  auto lora = sequence_hashes(t.data(), t.size(), 4, seed_for("sql-adapter"));
  auto other = sequence_hashes(t.data(), t.size(), 4, seed_for("chat"));
  CHECK(base[0] != lora[0]);
  CHECK(lora[0] != other[0]);
}

TEST_CASE("a match limit keys only the full blocks before it, with or "
          "without other identity") {
  std::vector<uint32_t> t(40);
  for (size_t i = 0; i < t.size(); ++i)
    t[i] = static_cast<uint32_t>(i + 1);
  prompt_identity plain;
  auto all = sequence_keys(t.data(), t.size(), 4, plain);
  REQUIRE(all.size() == 10);
  plain.match_limit = 18; // blocks 0-3 end before token 18; block 4 spans it
  auto cut = sequence_keys(t.data(), t.size(), 4, plain);
  CHECK(cut == std::vector<uint64_t>(all.begin(), all.begin() + 4));
  plain.match_limit = 0;
  CHECK(sequence_keys(t.data(), t.size(), 4, plain).empty());
  prompt_identity salted{"", "tenant-a", {}, 12};
  auto s = sequence_keys(t.data(), t.size(), 4, salted);
  salted.match_limit.reset();
  auto s_all = sequence_keys(t.data(), t.size(), 4, salted);
  CHECK(s.size() == 3);
  CHECK(s == std::vector<uint64_t>(s_all.begin(), s_all.begin() + 3));
}
