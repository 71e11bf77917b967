// The open-addressing table under random inserts and erases, against
// std::unordered_map: backward-shift deletion keeps every probe run whole.
#include "actors/indexer/flat_table.hpp"

#include <random>
#include <unordered_map>

#include <catch2/catch.hpp>

using outrider::indexer::flat_table;

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
      if (rng() % 3 == 0) {
        t.erase(k);
        ref.erase(k);
      } else {
        bool added = false;
        auto& v = t.insert(k, added);
        REQUIRE(added == !ref.count(k));
        v += step;
        ref[k] += static_cast<uint64_t>(step);
      }
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
