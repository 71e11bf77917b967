// The open-addressing table under random inserts and erases, against
// std::unordered_map: backward-shift deletion keeps every probe run whole.
#include "actors/indexer/flat_table.hpp"

#include <algorithm>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include <catch2/catch.hpp>

using outrider::indexer::flat_table;

namespace {

// One step on the table and on the reference map alike: an erase, or an
// insert whose value `update` changes the same way in both.
template <class Table, class Ref, class Update>
void step_both(Table& t, Ref& ref, uint64_t k, bool erase, Update update) {
  if (erase) {
    t.erase(k);
    ref.erase(k);
    return;
  }
  bool added = false;
  auto& v = t.insert(k, added);
  REQUIRE(added == !ref.count(k));
  update(v);
  update(ref[k]);
}

} // namespace

TEST_CASE("flat_table: random inserts and erases agree with unordered_map",
          "[flat_table]") {
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    std::mt19937_64 rng{seed};
    flat_table<uint64_t> t;
    std::unordered_map<uint64_t, uint64_t> ref;
    // Few distinct keys, some with clustered homes (small values), so that
    // probe runs are long and wrap around the table's end.
    auto key = [&] { return rng() % 2 ? rng() % 3000 : (rng() % 3000) << 44; };
    for (int step = 0; step < 200000; ++step) {
      auto k = key();
      step_both(t, ref, k, rng() % 3 == 0,
                [&](uint64_t& v) { v += static_cast<uint64_t>(step); });
      if (step % 5000 == 0) {
        REQUIRE(t.size() == ref.size());
        for (const auto& [rk, rv] : ref) {
          auto* got = t.find(rk);
          REQUIRE(got);
          REQUIRE(*got == rv);
        }
        size_t seen = 0;
        t.each([&](uint64_t k2, uint64_t v2) {
          ++seen;
          REQUIRE(ref.at(k2) == v2);
        });
        REQUIRE(seen == ref.size());
      }
    }
  }
}

TEST_CASE("flat_table: a growth moves a few entries per call, every key "
          "found meanwhile",
          "[flat_table]") {
  // Values that own memory: a value moved, erased or left behind twice or
  // never shows under the sanitizers.
  flat_table<std::string> t;
  std::unordered_map<uint64_t, std::string> ref;
  std::mt19937_64 rng{7};
  size_t growing_steps = 0, longest = 0, run = 0;
  for (int step = 0; step < 120000; ++step) {
    uint64_t k = rng() % 200000;
    step_both(t, ref, k, rng() % 4 == 0, [&](std::string& v) {
      v = std::to_string(step) + std::string(24, 'x'); // on the heap
    });
    if (t.growing()) {
      ++growing_steps;
      longest = std::max(longest, ++run);
      // Both tables answer while the old one drains.
      for (int probe = 0; probe < 8; ++probe) {
        auto q = rng() % 200000;
        auto* got = t.find(q);
        auto r = ref.find(q);
        REQUIRE((got != nullptr) == (r != ref.end()));
        if (got)
          REQUIRE(*got == r->second);
      }
    } else {
      run = 0;
    }
  }
  REQUIRE(t.size() == ref.size());
  // Tables past 4,096 slots grew incrementally, each growth spread over
  // many calls, and every one finished before the next was due.
  CHECK(growing_steps > 1000);
  CHECK(longest > 100);
  size_t seen = 0;
  t.each([&](uint64_t k, const std::string& v) {
    ++seen;
    REQUIRE(ref.at(k) == v);
  });
  CHECK(seen == ref.size());

  // Copies and moves keep every entry, also in the middle of a growth.
  flat_table<std::string> g;
  for (uint64_t k = 0;; ++k) {
    bool added = false;
    g.insert(k * 0x9e3779b97f4a7c15ULL, added) = std::to_string(k);
    if (g.growing() && k > 10000)
      break;
  }
  REQUIRE(g.growing());
  auto copy = g;
  auto moved = std::move(g);
  CHECK(g.size() == 0);
  CHECK(copy.size() == moved.size());
  for (uint64_t k = 0; k < copy.size(); ++k) {
    REQUIRE(copy.find(k * 0x9e3779b97f4a7c15ULL));
    REQUIRE(*moved.find(k * 0x9e3779b97f4a7c15ULL) == std::to_string(k));
  }
  moved.clear();
  CHECK(moved.size() == 0);
  CHECK_FALSE(moved.find(0));
}

TEST_CASE("flat_table: a reserved table holds its entries without growing",
          "[flat_table]") {
  flat_table<uint64_t, 80> t;
  t.reserve(545); // 545 / 0.8 = 681.25: 682 slots
  CHECK(t.capacity() == 682);
  for (uint64_t k = 1; k <= 545; ++k) {
    bool added = false;
    t.insert(k * 0x9e3779b97f4a7c15ULL, added) = k;
    REQUIRE(added);
    REQUIRE(t.capacity() == 682); // not one growth on the way
  }
  for (uint64_t k = 1; k <= 545; ++k)
    REQUIRE(*t.find(k * 0x9e3779b97f4a7c15ULL) == k);
  t.reserve(100000); // allocated already: nothing happens
  CHECK(t.capacity() == 682);
  // Past the reserved load it grows as any table.
  for (uint64_t k = 546; k <= 1000; ++k) {
    bool added = false;
    t.insert(k * 0x9e3779b97f4a7c15ULL, added) = k;
  }
  CHECK(t.capacity() == 1534); // 682 -> 1,023 -> 1,534
  CHECK(t.size() == 1000);
  t.clear();
  CHECK(t.capacity() == 0);
  flat_table<uint64_t, 80> lazy;
  lazy.reserve(0);
  CHECK(lazy.capacity() == 0);
}

TEST_CASE("flat_table: the keys 0 and 1, its slots' markers, are held like "
          "any other",
          "[flat_table]") {
  // A slot's key tells empty (0) and gone (1): the real keys 0 and 1 live
  // apart, through growth, draining, copies, moves and clears.
  flat_table<std::string> t;
  bool added = false;
  t.insert(0, added) = "zero";
  CHECK(added);
  t.insert(1, added) = "one";
  CHECK(added);
  CHECK(t.size() == 2);
  t.insert(0, added) += "!";
  CHECK_FALSE(added);
  // Enough other keys for incremental growths (from 4,096 slots up),
  // looked up while old tables drain.
  for (uint64_t k = 2; k < 20000; ++k) {
    t.insert(k * 0x9e3779b97f4a7c15ULL, added) = std::to_string(k);
    REQUIRE(t.find(0));
    REQUIRE(*t.find(0) == "zero!");
    REQUIRE(*t.find(1) == "one");
  }
  CHECK(t.size() == 20000);
  size_t seen = 0, markers = 0;
  t.each([&](uint64_t k, const std::string& v) {
    ++seen;
    if (k < 2) {
      ++markers;
      CHECK(v == (k == 0 ? "zero!" : "one"));
    }
  });
  CHECK(seen == 20000);
  CHECK(markers == 2);
  auto copy = t;
  auto moved = std::move(t);
  CHECK(*copy.find(1) == "one");
  CHECK(*moved.find(0) == "zero!");
  moved.erase(0);
  CHECK_FALSE(moved.find(0));
  CHECK(*moved.find(1) == "one");
  CHECK(moved.size() == 19999);
  CHECK(*copy.find(0) == "zero!"); // the copy is its own
  copy.clear();
  CHECK(copy.size() == 0);
  CHECK_FALSE(copy.find(1));
  // Erasing the others leaves the markers' keys alone.
  for (uint64_t k = 2; k < 20000; ++k)
    moved.erase(k * 0x9e3779b97f4a7c15ULL);
  CHECK(moved.size() == 1);
  CHECK(*moved.find(1) == "one");
}
