// The open-addressing table under random inserts and erases, against
// std::unordered_map: backward-shift deletion keeps every probe run whole.
#include "actors/indexer/flat_table.hpp"

#include <algorithm>
#include <malloc.h>
#include <random>
#include <string>
#include <sys/resource.h>
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

TEST_CASE("flat_table: a table of fleet size grows into arrays a helper "
          "made ahead",
          "[flat_table]") {
  // Tables grow half as large again from 16 slots: ... 52,597, 78,895,
  // 118,342, 177,513, 266,269 (and more: below). From 65,536 slots up the next
  // arrays are asked for at 70% and taken by the growth once ready (the table
  // filling on meanwhile, up to 85%); every entry stays found.
  flat_table<uint64_t> t;
  auto key = [](uint64_t k) { return k * 0x9e3779b97f4a7c15ULL + 1; };
  uint64_t n = 0;
  for (; n < 180000; ++n) {
    bool added = false;
    t.insert(key(n), added) = n;
    REQUIRE(added);
  }
  // Each growth from 78,895 slots up took prepared arrays: to 118,342, to
  // 177,513 (by 85% of 118,342 at the latest) and to 266,269 (by 85% of
  // 177,513, 150,886 entries), which as arrays of over 4 MiB come in whole
  // 2 MiB pages, all of them used: 393,216 slots, 70% full at 275,252.
  CHECK(t.capacity() == 393216);
  CHECK(t.prepared_growths() == 3);
  for (uint64_t k = 0; k < n; ++k) {
    auto* v = t.find(key(k));
    REQUIRE(v);
    REQUIRE(*v == k);
  }

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  {
    // The new arrays' pages are the helper's to fault in, not the
    // owner's: from just before a growth until its move is done, the
    // inserting thread takes (almost) no page faults. The growth from
    // 118,342 to 177,513 slots: 2.8 MB of arrays, under the huge page
    // size, taken fresh from the kernel (the allocator told to map
    // anything from 256 KiB up rather than reuse its heap): 693 pages the
    // owner faults in when left to it, as when the compiler dropped a
    // prefault. Not under the sanitizers, whose shadow memory this thread
    // faults in.
    mallopt(M_MMAP_THRESHOLD, 256 << 10);
    auto faults = [] {
      rusage u{};
      getrusage(RUSAGE_THREAD, &u);
      return u.ru_minflt;
    };
    flat_table<uint64_t> f;
    uint64_t m = 0;
    for (; m < 82000; ++m) { // 118,342 slots are 70% full at 82,840
      bool added = false;
      f.insert(key(m), added) = m;
    }
    CHECK_FALSE(f.growing());
    auto before = faults();
    for (bool grew = false; !grew || f.growing(); ++m) {
      bool added = false;
      f.insert(key(m), added) = m;
      grew = grew || f.growing();
    }
    auto taken = faults() - before;
    CHECK(f.prepared_growths() == 2);
    INFO("faults taken " << taken);
    CHECK(taken < 16);
    for (uint64_t k = 0; k < m; k += 7)
      REQUIRE(f.find(key(k)));
  }
#endif

  // A table that goes (or is cleared, or moved) while its helper is at
  // work waits for it and frees what it made (the sanitizers' runs tell a
  // leak or a race).
  for (int round = 0; round < 3; ++round) {
    flat_table<std::string> u;
    // Just past 70% of 118,342 slots (82,840 entries): the helper has
    // been asked.
    for (uint64_t k = 0; k < 82850; ++k) {
      bool added = false;
      u.insert(key(k), added) = "v";
    }
    CHECK(u.prepared_growths() == 1); // 78,895 -> 118,342
    if (round == 1)
      u.clear();
    if (round == 2) {
      auto moved = std::move(u);
      bool added = false;
      moved.insert(key(999999), added);
      CHECK(moved.size() == 82851);
    }
  }
}

TEST_CASE("flat_table: tables growing in step share two helper threads",
          "[flat_table]") {
  // 24 tables filled in step (a fleet's ranks filling together) all ask
  // for their next arrays within microseconds; at most two helpers run at
  // once, the rest grow on their own thread, and every entry stays found.
  using outrider::indexer::prefault_helpers;
  std::vector<flat_table<uint64_t>> tables(24);
  auto key = [](uint64_t k) { return k * 0x9e3779b97f4a7c15ULL + 7; };
  for (uint64_t k = 0; k < 100000; ++k) // past 2^17 slots' growth
    for (auto& t : tables) {
      bool added = false;
      t.insert(key(k), added) = k;
    }
  size_t prepared = 0;
  for (auto& t : tables) {
    prepared += t.prepared_growths();
    REQUIRE(t.size() == 100000);
    for (uint64_t k = 0; k < 100000; k += 97)
      REQUIRE(*t.find(key(k)) == k);
  }
  CHECK(prefault_helpers::most() <= 2);
  CHECK(prepared >= 1);
  CHECK(prepared < 2 * tables.size()); // some grew without a helper
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

TEST_CASE("table_memory: arrays of 4 MiB and more come zeroed, aligned to "
          "2 MiB, and go back, and a table that size holds its entries",
          "[flat_table]") {
  namespace tm = outrider::indexer::table_memory;
  for (size_t bytes :
       {tm::huge_from, tm::huge_from + 12345, 3 * tm::huge_from}) {
    auto* p = static_cast<unsigned char*>(tm::take(bytes));
    REQUIRE(p);
    CHECK(reinterpret_cast<uintptr_t>(p) % tm::huge_page == 0);
    bool zero = true;
    for (size_t i = 0; i < bytes; i += 4093)
      zero = zero && p[i] == 0;
    CHECK(zero);
    CHECK(p[bytes - 1] == 0);
    // Writable to its last byte; what was written is not seen again.
    for (size_t i = 0; i < bytes; i += 4093)
      p[i] = 7;
    p[bytes - 1] = 7;
    tm::give(p, bytes);
    auto* q = static_cast<unsigned char*>(tm::take(bytes));
    REQUIRE(q);
    CHECK(q[0] == 0);
    CHECK(q[bytes - 1] == 0);
    tm::give(q, bytes);
  }
  // 300,000 entries: the table's arrays pass 4 MiB (16-byte slots) and
  // come from the kernel; they grow, drain and go back with the table.
  flat_table<uint64_t> t;
  bool added = false;
  for (uint64_t k = 0; k < 300000; ++k)
    t.insert(k * 0x9e3779b97f4a7c15ULL, added) = k;
  CHECK(t.capacity() * 16 >= tm::huge_from);
  for (uint64_t k = 0; k < 300000; k += 997)
    REQUIRE(*t.find(k * 0x9e3779b97f4a7c15ULL) == k);
  CHECK(t.size() == 300000);
  t.clear();
  CHECK(t.capacity() == 0);
}

TEST_CASE("flat_table: a table that stops filling short of its load limit "
          "holds no next arrays",
          "[flat_table]") {
  // A fleet whose caches are full keeps its index at one size. A table
  // grown to 266,269 slots of 16 bytes (over 4 MiB: mapped apart, in whole
  // 2 MiB pages, all of which it uses: 393,216 slots) filled to 65%, under
  // its 70% limit, holds only its own arrays. (Next arrays were asked for
  // from 7/8 of the limit, 61%, and held as long as the table stayed in
  // that band: three times as much.)
  namespace tm = outrider::indexer::table_memory;
  auto key = [](uint64_t k) { return k * 0x9e3779b97f4a7c15ULL + 3; };
  auto before = tm::mapped().load();
  flat_table<uint64_t> t;
  uint64_t n = 0;
  bool added = false;
  auto add = [&] {
    t.insert(key(n), added) = n;
    ++n;
  };
  while (t.capacity() * 16 < tm::huge_from)
    add();
  REQUIRE(t.capacity() == (size_t{6} << 20) / 16);
  while (n < t.capacity() * 65 / 100)
    add();
  REQUIRE_FALSE(t.growing());
  CHECK(tm::mapped().load() - before == t.capacity() * 16);
  // It still grows into prepared arrays once it passes the limit (by 85%
  // at the latest, waiting for them there), and every entry stays found.
  auto prepared = t.prepared_growths();
  auto cap = t.capacity();
  while (n < cap * 86 / 100)
    add();
  CHECK(t.capacity() > cap);
  CHECK(t.prepared_growths() == prepared + 1);
  for (uint64_t k = 0; k < n; k += 13)
    REQUIRE(*t.find(key(k)) == k);
  t.clear();
  CHECK(tm::mapped().load() == before);
}
