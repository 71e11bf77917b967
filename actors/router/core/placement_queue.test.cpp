// When a rank counts as busy (requests then wait in the router): the
// prompts waiting behind the one it computes against --router-queue-kv-share
// of the KV blocks its running requests leave free.
#include <catch2/catch.hpp>

#include "actors/router/core/placement.hpp"
#include "actors/router/core/placement_fixtures.hpp"

using namespace outrider;
using namespace outrider::router;
using namespace outrider::router::test;
using namespace std::chrono_literals;

namespace {

// `blocks` blocks of 4 tokens, from `base`.
std::vector<uint32_t> prompt(uint32_t base, uint32_t blocks) {
  std::vector<uint32_t> t(size_t{blocks} * 4);
  for (size_t i = 0; i < t.size(); ++i)
    t[i] = base + static_cast<uint32_t>(i);
  return t;
}

route_decision place(placement& p, std::vector<uint32_t> tokens,
                     std::string role = {}) {
  route_request req;
  req.tokens = std::move(tokens);
  if (!role.empty())
    req.role = engine::worker_role_of(role).value();
  return p.place(req);
}

cluster::worker_record sized(const std::string& id, uint64_t kv_blocks,
                             std::string role = "aggregated") {
  auto r = worker(id);
  r.total_kv_blocks = kv_blocks;
  r.role = engine::worker_role_of(role).value();
  return r;
}

} // namespace

TEST_CASE("placement: prompts waiting past their share of the free KV blocks "
          "make a rank busy, the one it computes does not count",
          "[placement]") {
  manual_clock clk;
  router_config cfg;
  cfg.mode = engine::router_mode_of("kv").value();
  cfg.queue_kv_share = 0.1;
  placement p{cfg, clk.fn(), 1};
  p.add_worker(sized("a", 100));
  p.add_worker(sized("b", 100));
  // The first prompt on each rank is the one it computes: nothing waits.
  auto d1 = place(p, prompt(0, 10));
  auto d2 = place(p, prompt(1000, 10));
  REQUIRE(d1.ok);
  REQUIRE(d2.ok);
  REQUIRE(d1.worker_id != d2.worker_id);
  // One more on each: 10 blocks wait behind it against 0.1 x (100 - 20
  // the two will hold) = 8: busy everywhere.
  auto d3 = place(p, prompt(2000, 10));
  auto d4 = place(p, prompt(3000, 10));
  REQUIRE(d3.ok);
  REQUIRE(d4.ok);
  REQUIRE(d3.worker_id != d4.worker_id);
  auto d5 = place(p, prompt(4000, 1));
  CHECK_FALSE(d5.ok);
  CHECK(d5.busy);
  // One rank: a prompt computed makes the one behind it the computed one.
  placement one{cfg, clk.fn(), 1};
  one.add_worker(sized("a", 100));
  auto e1 = place(one, prompt(0, 10));
  REQUIRE(e1.ok);
  REQUIRE(place(one, prompt(1000, 10)).ok);
  CHECK(place(one, prompt(2000, 1)).busy); // 10 wait against 0.1 x 80
  one.prefilled(e1.key);
  REQUIRE(place(one, prompt(3000, 1)).ok);  // nothing waited
  REQUIRE(place(one, prompt(4000, 10)).ok); // 1 waited against 0.1 x 79
  CHECK(place(one, prompt(5000, 1)).busy);  // 11 wait against 0.1 x 69
  // An engine that reports far more of its cache free than the books say.
  one.engine_reported({"a", {{0, 0, 1000}}});
  CHECK(place(one, prompt(6000, 1)).ok);
  // Off with share 0, in the modes blind to caches, and for workers of
  // unknown size.
  cfg.mode = engine::router_mode_of("round-robin").value();
  placement blind{cfg, clk.fn(), 1};
  blind.add_worker(sized("a", 100));
  for (uint32_t i = 0; i < 4; ++i)
    CHECK(place(blind, prompt(i * 1000, 20)).ok);
  cfg.mode = engine::router_mode_of("kv").value();
  cfg.queue_kv_share = 0;
  placement off{cfg, clk.fn(), 1};
  off.add_worker(sized("a", 100));
  for (uint32_t i = 0; i < 4; ++i)
    CHECK(place(off, prompt(i * 1000, 20)).ok);
  cfg.queue_kv_share = 0.1;
  placement unknown{cfg, clk.fn(), 1};
  unknown.add_worker(sized("a", 0));
  for (uint32_t i = 0; i < 4; ++i)
    CHECK(place(unknown, prompt(i * 1000, 20)).ok);
}

TEST_CASE("placement: prefill-only placements are not held by the KV share",
          "[placement]") {
  manual_clock clk;
  router_config cfg;
  cfg.queue_kv_share = 0.1;
  placement p{cfg, clk.fn(), 1};
  p.add_worker(sized("pf", 100, "prefill"));
  for (uint32_t i = 0; i < 3; ++i)
    CHECK(place(p, prompt(i * 1000, 20), "prefill").ok);
}

namespace {

std::vector<uint32_t> concat(std::vector<uint32_t> a,
                             const std::vector<uint32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

} // namespace

TEST_CASE("placement: a prompt mostly cached on its rank goes ahead of the "
          "engine's queue, and the KV share then counts it as computed "
          "first",
          "[placement]") {
  manual_clock clk;
  router_config cfg;
  cfg.mode = engine::router_mode_of("kv").value();
  cfg.priority_overlap = 0.5;
  cfg.queue_kv_share = 0.1;
  placement p{cfg, clk.fn(), 1};
  p.add_worker(sized("a", 100));
  auto cached = prompt(0, 6);
  report_stored(p, "a", cached, 100);
  // Cold: no priority. 6 of 8 blocks cached: ahead.
  auto cold = place(p, prompt(5000, 20));
  REQUIRE(cold.ok);
  CHECK(cold.priority == 0);
  auto warm = place(p, concat(cached, prompt(9000, 2)));
  REQUIRE(warm.ok);
  CHECK(warm.overlap_blocks == 6);
  CHECK(warm.priority == -1);
  // The warm prompt is computed first: the 20 cold blocks wait behind it,
  // more than 0.1 x the free blocks.
  CHECK(place(p, prompt(7000, 1)).busy);
  p.prefilled(warm.key);
  // Now the cold one is computed and nothing waits.
  CHECK(place(p, prompt(7000, 1)).ok);
  // 2 of 8 cached: not enough; predicted blocks do not count.
  auto some = place(p, concat(prompt(0, 2), prompt(8000, 6)));
  CHECK(some.priority == 0);
  auto predicted = place(p, prompt(5000, 20));
  CHECK(predicted.chosen_overlap_blocks == 20);
  CHECK(predicted.priority == 0);
  // Off, or not kv mode: never.
  for (auto [mode, share] :
       {std::pair<const char*, double>{"kv", 0.0}, {"round-robin", 0.5}}) {
    router_config other = cfg;
    other.mode = engine::router_mode_of(mode).value();
    other.priority_overlap = share;
    other.queue_kv_share = 0;
    placement q{other, clk.fn(), 1};
    q.add_worker(sized("a", 100));
    report_stored(q, "a", cached, 100);
    auto d = place(q, concat(cached, prompt(9000, 2)));
    REQUIRE(d.ok);
    CHECK(d.priority == 0);
  }
}
