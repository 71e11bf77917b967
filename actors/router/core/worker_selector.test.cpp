#include "actors/router/core/worker_selector.hpp"

#include <map>

#include <catch2/catch.hpp>

using namespace outrider::router;

TEST_CASE("the worker with the prefix wins when loads are equal") {
  std::mt19937_64 rng{1};
  selector_config cfg;
  std::vector<candidate> c{{0, 0, 0, 0}, {1, 8, 0, 0}, {2, 3, 0, 0}};
  auto s = select_worker(c, 10, cfg, rng);
  REQUIRE(s);
  CHECK(s->slot == 1);
  CHECK(s->overlap_blocks == 8);
  CHECK(s->cost == Approx(2 + 2)); // 2 blocks to prefill, 2 new to hold
}

TEST_CASE("load outweighs a small overlap") {
  std::mt19937_64 rng{1};
  selector_config cfg;
  cfg.block_size = 16;
  // Slot 1 caches 2 blocks but has 20 blocks of prefill queued and a full
  // decode batch; slot 0 is idle.
  std::vector<candidate> c{{0, 0, 0, 0}, {1, 2, 320, 50}};
  auto s = select_worker(c, 10, cfg, rng);
  REQUIRE(s);
  CHECK(s->slot == 0);
  CHECK(cost(c[1], 10, cfg) == Approx(8 + 20 + 50 + 8));
}

TEST_CASE("the overlap weight trades prefill against decode load") {
  std::mt19937_64 rng{1};
  // Slot 0 caches everything but holds many decode blocks.
  std::vector<candidate> c{{0, 10, 0, 25}, {1, 0, 0, 0}};
  selector_config light;
  light.overlap_score_weight = 1.0; // 0 + 25 vs 10 + 10
  CHECK(select_worker(c, 10, light, rng)->slot == 1);
  selector_config heavy;
  heavy.overlap_score_weight = 3.0; // 0 + 25 vs 30 + 10
  CHECK(select_worker(c, 10, heavy, rng)->slot == 0);
}

TEST_CASE("the decode weight scales the decode load against the prefill") {
  std::mt19937_64 rng{1};
  // The same two slots: a lighter decode weight lets the cache win.
  std::vector<candidate> c{{0, 10, 0, 25}, {1, 0, 0, 0}};
  selector_config cfg;
  cfg.decode_weight = 0.25; // 0 + 6.25 vs 10 + 2.5
  CHECK(select_worker(c, 10, cfg, rng)->slot == 0);
  CHECK(cost(c[0], 10, cfg) == Approx(6.25));
}

TEST_CASE("on full caches the evict weight keeps a prompt where its prefix "
          "is instead of computing it again elsewhere") {
  std::mt19937_64 rng{1};
  selector_config cfg;
  cfg.block_size = 16;
  cfg.queue_weight = 0.25;
  cfg.decode_weight = 0;
  // Slot 0 caches 40 of the 100 blocks but has 200 blocks queued; slot 1
  // is idle. Both caches are full.
  std::vector<candidate> c{{0, 40, 3200, 0, 0}, {1, 0, 0, 0, 0}};
  CHECK(cost(c[0], 100, cfg) == Approx(60 + 50));
  CHECK(select_worker(c, 100, cfg, rng)->slot == 1); // 110 vs 100
  cfg.evict_weight = 1.5; // 60 + 90 + 50 vs 100 + 150
  CHECK(cost(c[0], 100, cfg) == Approx(200));
  CHECK(select_worker(c, 100, cfg, rng)->slot == 0);
  // Room left in slot 1's cache: its new blocks evict nothing.
  c[1].free_blocks = 100;
  CHECK(cost(c[1], 100, cfg) == Approx(100));
  CHECK(select_worker(c, 100, cfg, rng)->slot == 1);
  // Unknown room (no total from the worker): no eviction term.
  c[1].free_blocks = UINT64_MAX;
  CHECK(cost(c[1], 100, cfg) == Approx(100));
}

TEST_CASE("ties are broken at random, temperature samples") {
  std::mt19937_64 rng{7};
  selector_config cfg;
  std::vector<candidate> c{{0, 0, 0, 0}, {1, 0, 0, 0}, {2, 0, 0, 0}};
  std::map<uint32_t, int> seen;
  for (int i = 0; i < 300; ++i)
    seen[select_worker(c, 4, cfg, rng)->slot]++;
  CHECK(seen.size() == 3);
  for (auto& [slot, n] : seen)
    CHECK(n > 50);
  // With a temperature, the cheaper slot is picked more often, not always.
  selector_config warm;
  warm.temperature = 0.5;
  std::vector<candidate> d{{0, 4, 0, 0}, {1, 0, 0, 0}};
  std::map<uint32_t, int> picks;
  for (int i = 0; i < 1000; ++i)
    picks[select_worker(d, 4, warm, rng)->slot]++;
  CHECK(picks[0] > picks[1]);
  CHECK(picks[1] > 0);
  CHECK_FALSE(select_worker({}, 4, cfg, rng));
}
