#include "actors/router/core/flow_queue.hpp"

#include <map>
#include <random>

#include <catch2/catch.hpp>

using namespace outrider::router;

TEST_CASE("flow queue: a higher band is served first, strictly") {
  flow_queue q;
  REQUIRE(q.push(1, "a", 0, 10).queued);
  REQUIRE(q.push(2, "a", 0, 10).queued);
  REQUIRE(q.push(3, "b", 5, 10).queued);
  REQUIRE(q.push(4, "c", -1, 10).queued);
  CHECK(q.pop() == 3u);
  CHECK(q.pop() == 1u);
  REQUIRE(q.push(5, "d", 5, 10).queued); // overtakes what is queued below it
  CHECK(q.pop() == 5u);
  CHECK(q.pop() == 2u);
  CHECK(q.pop() == 4u);
  CHECK_FALSE(q.pop());
  CHECK(q.empty());
}

TEST_CASE("flow queue: flows share a band by prompt tokens, not by requests") {
  flow_config cfg;
  cfg.quantum = 512;
  flow_queue q{cfg};
  uint64_t id = 0;
  std::map<uint64_t, std::pair<std::string, uint64_t>> what;
  for (int i = 0; i < 400; ++i) {
    what[++id] = {"big", 1000};
    REQUIRE(q.push(id, "big", 0, 1000).queued);
    what[++id] = {"small", 100};
    REQUIRE(q.push(id, "small", 0, 100).queued);
  }
  std::map<std::string, uint64_t> tokens, requests;
  for (int i = 0; i < 200; ++i) {
    auto next = q.pop();
    REQUIRE(next);
    tokens[what[*next].first] += what[*next].second;
    ++requests[what[*next].first];
  }
  // Equal tokens (within a request and a quantum), so ten small requests
  // for each big one.
  auto diff =
    static_cast<int64_t>(tokens["big"]) - static_cast<int64_t>(tokens["small"]);
  CHECK(std::abs(diff) <= 1000 + 512);
  CHECK(requests["small"] > 8 * requests["big"]);
}

TEST_CASE("flow queue: a flood in one flow does not delay another flow's "
          "occasional request (the new-flow list)") {
  flow_config cfg;
  cfg.band_cap = 100000;
  flow_queue q{cfg};

  for (uint64_t i = 1; i <= 5000; ++i)
    REQUIRE(q.push(i, "flood", 0, 300).queued);
  // Past the flood's first request: it is an old flow now.
  for (int i = 0; i < 3; ++i)
    q.pop();
  REQUIRE(q.push(9999, "trickle", 0, 300).queued);
  bool served = false;
  int waited = 0;
  for (; waited < 20 && !served; ++waited)
    served = q.pop() == 9999u;
  CHECK(waited == 1);
  // Once it floods too, it takes its turn like any other flow: within a
  // quantum (4096) of the other's tokens, 14 requests of 300.
  for (uint64_t i = 10000; i < 10100; ++i)
    REQUIRE(q.push(i, "trickle", 0, 300).queued);
  std::map<bool, int> served_of;
  for (int i = 0; i < 100; ++i)
    ++served_of[*q.pop() >= 10000];
  CHECK(served_of[true] >= 40);
  CHECK(served_of[false] >= 40);
  CHECK(served);
}

TEST_CASE("flow queue: a full band refuses, other bands still take") {
  flow_config cfg;
  cfg.band_cap = 3;
  flow_queue q{cfg};
  CHECK(q.push(1, "a", 0, 1).queued);
  CHECK(q.push(2, "b", 0, 1).queued);
  CHECK(q.push(3, "c", 0, 1).queued);
  // Full, and no flow has more waiting than a newcomer would: refused.
  auto refused = q.push(4, "d", 0, 1);
  CHECK_FALSE(refused.queued);
  CHECK_FALSE(refused.evicted);
  CHECK(q.push(5, "c", 1, 1).queued);
  CHECK(q.band_size(0) == 3);
  CHECK(q.band_size(1) == 1);
  CHECK_FALSE(q.push(1, "a", 2, 1).queued); // an id waits once
  CHECK(q.pop() == 5u);                     // band 1 first
  CHECK(q.pop() == 1u);
  CHECK(q.push(4, "d", 0, 1).queued); // room again
}

TEST_CASE("flow queue: a full band pushes out the flood's newest for "
          "another flow, never the other way round") {
  flow_config cfg;
  cfg.band_cap = 4;
  flow_queue q{cfg};
  for (uint64_t i = 1; i <= 4; ++i)
    REQUIRE(q.push(i, "flood", 0, 10).queued);
  // The flood cannot push out its own.
  auto more = q.push(5, "flood", 0, 10);
  CHECK_FALSE(more.queued);
  CHECK_FALSE(more.evicted);
  // Another tenant gets in; the flood's newest is shed instead.
  auto other = q.push(6, "trickle", 0, 10);
  CHECK(other.queued);
  CHECK(other.evicted == 4u);
  CHECK(q.size() == 4);
  CHECK_FALSE(q.remove(4));
  // Until the two are even: 2 and 2, then the trickle is refused too.
  CHECK(q.push(7, "trickle", 0, 10).evicted == 3u);
  auto even = q.push(8, "trickle", 0, 10);
  CHECK_FALSE(even.queued);
  CHECK_FALSE(even.evicted);
}

TEST_CASE("flow queue: a request that gives up leaves its line") {
  flow_queue q;
  REQUIRE(q.push(1, "a", 0, 10).queued);
  REQUIRE(q.push(2, "a", 0, 10).queued);
  REQUIRE(q.push(3, "b", 1, 10).queued);
  CHECK(q.flows() == 2);
  CHECK(q.remove(3));
  CHECK_FALSE(q.remove(3));
  CHECK(q.remove(1));
  CHECK(q.size() == 1);
  CHECK(q.flows() == 1);
  CHECK(q.pop() == 2u);
  CHECK(q.empty());
  CHECK(q.flows() == 0);
}

TEST_CASE("flow queue: every request comes out once, whatever the mix, in "
          "bounded work") {
  std::mt19937_64 rng{7};
  flow_config cfg;
  cfg.quantum = 64;
  cfg.band_cap = 100000;
  flow_queue q{cfg};
  std::map<uint64_t, int> band_of;
  uint64_t id = 0;
  size_t out = 0;
  int last_band = 1000;
  for (int round = 0; round < 2000; ++round) {
    for (int k = 0; k < 3; ++k) {
      auto band = static_cast<int>(rng() % 3);
      auto flow = "f" + std::to_string(rng() % 20);
      // Prompts up to 10^6 tokens against a quantum of 64.
      auto cost = 1 + rng() % 1000000;
      REQUIRE(q.push(++id, flow, band, cost).queued);
      band_of[id] = band;
    }
    if (round % 2 == 0)
      q.remove(1 + rng() % id) ? ++out : out;
    for (int k = 0; k < 2; ++k)
      if (auto next = q.pop()) {
        ++out;
        CHECK(band_of.count(*next));
        band_of.erase(*next);
      }
  }
  // Drained, each band before the ones below it.
  while (auto next = q.pop()) {
    ++out;
    CHECK(band_of[*next] <= last_band);
    last_band = band_of[*next];
  }
  CHECK(out == id);
  CHECK(q.empty());
}

TEST_CASE("flow queue: retuned, a lowered cap holds for the next push and "
          "sheds none already waiting") {
  flow_config cfg;
  cfg.band_cap = 8;
  flow_queue q{cfg};
  CHECK(q.push(1, "a", 0, 1).queued);
  CHECK(q.push(2, "a", 0, 1).queued);
  CHECK(q.push(3, "a", 0, 1).queued);
  cfg.band_cap = 2;
  q.retune(cfg);
  CHECK(q.band_size(0) == 3); // nobody pushed out
  CHECK_FALSE(q.push(4, "a", 0, 1).queued);
  CHECK(q.pop() == 1u);
  CHECK(q.pop() == 2u);
  CHECK(q.push(5, "a", 0, 1).queued); // one waits: below the new cap
  CHECK_FALSE(q.push(6, "a", 0, 1).queued);
  // Raised again: room at once.
  cfg.band_cap = 8;
  q.retune(cfg);
  CHECK(q.push(6, "a", 0, 1).queued);
  CHECK(q.band_size(0) == 3);
}
