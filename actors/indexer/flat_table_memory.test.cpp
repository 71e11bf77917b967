// flat_table at fleet size: the next arrays a helper makes and faults in,
// how many helpers run, the huge arrays table_memory maps, and what a
// table holds when its inserts stop (tidy).
#include <chrono>
#include <malloc.h>
#include <string>
#include <sys/resource.h>
#include <vector>

#include <catch2/catch.hpp>

#include "actors/indexer/flat_table.hpp"

using outrider::indexer::flat_table;

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

TEST_CASE("flat_table: a table whose inserts stop finishes its growth and "
          "its move on tidy",
          "[flat_table]") {
  namespace tm = outrider::indexer::table_memory;
  using namespace std::chrono;
  auto key = [](uint64_t k) { return k * 0x9e3779b97f4a7c15ULL + 5; };
  auto before = tm::mapped().load();
  // Fills `t` until 177,513 slots (2.8 MB, from malloc) are just past
  // 70%: the insert that crossed asked for the next arrays (266,269 slots:
  // 4.3 MB, mapped, 6 MiB). How many entries it put.
  auto fill_past_limit = [&](flat_table<uint64_t>& t) {
    uint64_t n = 0;
    bool added = false;
    while (t.capacity() != 177513 || n * 100 <= t.capacity() * 70) {
      t.insert(key(n), added) = n;
      ++n;
      if (n >= 200000) // bounded: 177,513 slots are long passed by then
        FAIL("capacity " << t.capacity() << " at " << n << " entries");
    }
    return n;
  };
  // Tidies until nothing is left, for at most 20 s.
  auto settle = [](flat_table<uint64_t>& t, size_t budget) {
    auto deadline = steady_clock::now() + seconds(20);
    int calls = 1;
    while (t.tidy(budget) && steady_clock::now() < deadline)
      ++calls;
    return calls;
  };
  {
    // Past the limit, and then no insert comes to take the arrays.
    flat_table<uint64_t> t;
    uint64_t n = fill_past_limit(t);
    REQUIRE_FALSE(t.growing());
    auto prepared = t.prepared_growths();
    // Small budgets: the move takes many calls, each bounded.
    CHECK(settle(t, 4096) > 10);
    CHECK(t.capacity() == (size_t{6} << 20) / 16);
    CHECK_FALSE(t.growing());
    CHECK(t.prepared_growths() == prepared + 1);
    CHECK(tm::mapped().load() - before == size_t{6} << 20);
    for (uint64_t k = 0; k < n; ++k)
      REQUIRE(*t.find(key(k)) == k);
    CHECK_FALSE(t.tidy(4096)); // nothing left
  }
  {
    // The same, but erases take the table back under its limit before
    // its arrays are taken: they go, and the table stays as it was.
    flat_table<uint64_t> t;
    uint64_t n = fill_past_limit(t);
    bool added = false;
    for (uint64_t k = 0; k < 1000; ++k)
      t.erase(key(k));
    settle(t, 4096);
    CHECK(t.capacity() == 177513);
    CHECK(tm::mapped().load() == before); // no next arrays held
    for (uint64_t k = 1000; k < n; ++k)
      REQUIRE(*t.find(key(k)) == k);
    // Past the limit again, it asks again and grows.
    for (uint64_t k = 0; k < 1000; ++k)
      t.insert(key(k), added) = k;
    settle(t, 1 << 20);
    CHECK(t.capacity() == (size_t{6} << 20) / 16);
    CHECK(t.size() == n);
  }
  CHECK(tm::mapped().load() == before);
}
