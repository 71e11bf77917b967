// Sparse slot sets under random sets and clears, against std::set: the
// words stay sorted and non-zero, one word inline, copies deep.
#include "actors/indexer/slot_words.hpp"

#include <algorithm>
#include <random>
#include <set>

#include <catch2/catch.hpp>

using outrider::indexer::slot_words;

namespace {

// Every word non-zero, sorted, and together exactly `ref`.
void agrees(const slot_words& s, const std::set<uint32_t>& ref) {
  std::set<uint32_t> got;
  for (size_t i = 0; i < s.size(); ++i) {
    // Copied out: a word is packed, and Catch takes its operands by
    // reference (a misaligned one, for the bits).
    uint32_t w = s[i].first;
    uint64_t bits = s[i].second;
    REQUIRE(bits != 0);
    if (i > 0)
      REQUIRE(s[i - 1].first < w);
    for (auto b = bits; b; b &= b - 1)
      got.insert(w * 64 + static_cast<uint32_t>(__builtin_ctzll(b)));
  }
  REQUIRE(got == ref);
  REQUIRE(s.empty() == ref.empty());
}

} // namespace

TEST_CASE("slot_words: random sets and clears agree with std::set",
          "[slot_words]") {
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    std::mt19937_64 rng{seed};
    slot_words s;
    std::set<uint32_t> ref;
    // Slots in a few words far apart (one inline word, then many), and
    // sometimes in one word only.
    auto slot = [&] {
      auto w = static_cast<uint32_t>(rng() % (seed == 1 ? 1 : 6)) * 40;
      return w * 64 + static_cast<uint32_t>(rng() % 64);
    };
    for (int step = 0; step < 50000; ++step) {
      auto x = slot();
      if (rng() % 2) {
        s.clear(x);
        ref.erase(x);
      } else {
        s.set(x);
        ref.insert(x);
      }
      REQUIRE(s.test(x) == ref.count(x));
      if (step % 997 == 0) {
        agrees(s, ref);
        slot_words copy = s; // deep: changing one leaves the other
        copy.set(9999);
        agrees(s, ref);
        s = copy;
        ref.insert(9999);
        agrees(s, ref);
      }
    }
    agrees(s, ref);
  }
}

TEST_CASE("slot_words: a slot far up costs one inline word", "[slot_words]") {
  slot_words s;
  s.set(9999);
  REQUIRE(s.size() == 1);
  CHECK(s[0] == slot_words::word{156, uint64_t{1} << 15});
  CHECK(s.bits(156) == uint64_t{1} << 15);
  CHECK(s.bits(0) == 0);
  s.clear(9999);
  CHECK(s.empty());
  CHECK(sizeof(slot_words) == 32);
}

TEST_CASE("slot_words: sets compare by fingerprint, however they were built",
          "[slot_words]") {
  std::mt19937_64 rng{7};
  for (int round = 0; round < 200; ++round) {
    // The same members, set in two orders, the second with detours
    // (members set and cleared again, repeats).
    std::vector<uint32_t> members;
    auto n = 1 + rng() % 40;
    for (size_t i = 0; i < n; ++i)
      members.push_back(static_cast<uint32_t>(rng() % 20000));
    slot_words a, b;
    for (auto m : members)
      a.set(m);
    std::shuffle(members.begin(), members.end(), rng);
    for (auto m : members) {
      auto detour = static_cast<uint32_t>(rng() % 20000);
      bool was = b.test(detour);
      b.set(detour);
      b.set(m);
      b.set(m);
      if (!was &&
          std::find(members.begin(), members.end(), detour) == members.end())
        b.clear(detour);
    }
    REQUIRE(a.same(b));
    // One member more, or one fewer, or one moved: not the same.
    auto c = a;
    c.set(20001);
    CHECK_FALSE(c.same(a));
    auto d = a;
    d.clear(members.front());
    CHECK_FALSE(d.same(a));
    d.set(members.front() + 20000);
    CHECK_FALSE(d.same(a));
    d.clear(members.front() + 20000);
    d.set(members.front());
    CHECK(d.same(a));
  }
}
