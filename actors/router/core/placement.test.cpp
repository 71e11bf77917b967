#include "actors/router/core/placement.hpp"

#include <catch2/catch.hpp>

#include "actors/router/core/placement_fixtures.hpp"

using namespace outrider;
using namespace outrider::router;
using namespace outrider::router::test;
using namespace std::chrono_literals;

namespace {

router_config mode(std::string m) {
  router_config c;
  c.mode = engine::router_mode_of(m).value();
  return c;
}

} // namespace

TEST_CASE("placement: the same seed places the same way", "[placement]") {
  manual_clock clk;
  auto run = [&](uint64_t seed) {
    placement p{mode("random"), clk.fn(), seed};
    for (auto id : {"a", "b", "c", "d"})
      p.add_worker(worker(id));
    std::vector<std::string> picks;
    for (uint32_t i = 0; i < 32; ++i) {
      auto d = place_prompt(p, counting_prompt(i * 100));
      REQUIRE(d.ok);
      picks.push_back(d.worker_id);
      p.release(d.key);
    }
    return picks;
  };
  CHECK(run(7) == run(7));
  CHECK(run(7) != run(8));
}

TEST_CASE("placement: KV events make the index win over an idle rank",
          "[placement]") {
  manual_clock clk;
  placement p{mode("kv"), clk.fn(), 3};
  p.add_worker(worker("a"));
  p.add_worker(worker("b"));
  // b reports the prompt's blocks as stored.
  auto tokens = counting_prompt(500);
  worker_events ev;
  ev.worker_id = "b";
  kv::block_stored stored;
  stored.block_size = 4;
  stored.token_ids = tokens;
  for (uint64_t i = 0; i < 4; ++i)
    stored.block_hashes.push_back(1000 + i);
  ev.events.emplace_back(stored);
  REQUIRE(p.apply_events(ev));
  auto d = place_prompt(p, tokens);
  CHECK(d.worker_id == "b");
  CHECK(d.overlap_blocks == 4);
  // Unknown workers and ranks are refused, not applied.
  ev.worker_id = "zz";
  CHECK_FALSE(p.apply_events(ev));
  ev.worker_id = "b";
  ev.rank = 3;
  CHECK_FALSE(p.apply_events(ev));
}

TEST_CASE("placement: a rank's table is made for its share of the "
          "record's cache, within a bound",
          "[placement]") {
  manual_clock clk;
  placement p{mode("kv"), clk.fn(), 3};
  auto two_ranks = worker("a");
  two_ranks.data_parallel_size = 2;
  two_ranks.total_kv_blocks = 512; // 256 a rank: 273 with the margin
  p.add_worker(two_ranks);
  auto claims_much = worker("b");
  claims_much.total_kv_blocks = uint64_t{1} << 40;
  p.add_worker(claims_much);
  p.add_worker(worker("c")); // says nothing of its cache
  for (std::string id : {"a", "b", "c"})
    report_stored(p, id, counting_prompt(500, 4), 1000); // one block each
  const auto& gpu = p.index().tier(kv::medium::gpu);
  CHECK(gpu.table_slots(0) == 342);  // a's rank 0: 273 at 80%
  CHECK(gpu.table_slots(1) == 0);    // a's rank 1: no block yet
  CHECK(gpu.table_slots(2) == 2561); // b: the bound, 2,048 blocks
  CHECK(gpu.table_slots(3) == 16);   // c: grows as it fills
}

TEST_CASE("placement: every rank above the queue threshold means wait",
          "[placement]") {
  manual_clock clk;
  auto cfg = mode("round-robin");
  cfg.queue_threshold = 10;
  placement p{cfg, clk.fn(), 1};
  p.add_worker(worker("a"));
  p.add_worker(worker("b"));
  auto d1 = place_prompt(p, counting_prompt(0));
  auto d2 = place_prompt(p, counting_prompt(100));
  REQUIRE(d1.ok);
  REQUIRE(d2.ok);
  CHECK(d1.worker_id != d2.worker_id);
  auto d3 = place_prompt(p, counting_prompt(200));
  CHECK_FALSE(d3.ok);
  CHECK(d3.busy);
  // One prompt computed: its rank takes work again.
  auto slot = p.prefilled(d1.key);
  REQUIRE(slot);
  CHECK(p.load(*slot).prefill_tokens == 0);
  CHECK(p.load(*slot).decode_blocks == 4);
  auto d4 = place_prompt(p, counting_prompt(300));
  REQUIRE(d4.ok);
  CHECK(d4.worker_id == d1.worker_id);
  p.release(d1.key);
  CHECK(p.load(*slot).decode_blocks == 4); // d4's
}

TEST_CASE("placement: workers of another model or block size are refused",
          "[placement]") {
  manual_clock clk;
  auto cfg = mode("kv");
  cfg.model = "m";
  placement p{cfg, clk.fn(), 1};
  CHECK(p.add_worker(worker("a")) == placement::join::joined);
  CHECK(p.add_worker(worker("a")) == placement::join::unchanged);
  auto other = worker("b");
  other.model = "x";
  CHECK(p.add_worker(other) == placement::join::refused_model);
  other = worker("c");
  other.kv_block_size = 16;
  CHECK(p.add_worker(other) == placement::join::refused_block_size);
  p.remove_worker("a");
  CHECK_FALSE(place_prompt(p, counting_prompt(0)).ok);
}

TEST_CASE("placement: an engine's own KV report counts while it is fresh",
          "[placement]") {
  manual_clock clk;
  placement p{mode("kv"), clk.fn(), 1};
  p.add_worker(worker("a"));
  auto before = place_prompt(p, counting_prompt(0));
  CHECK(before.engine_used_kv_blocks == -1); // nothing reported yet
  p.release(before.key);
  p.engine_reported({"a", {{0, 120, 1000}, {7, 5, 5}}}); // rank 7: no such
  p.engine_reported({"nobody", {{0, 1, 1}}});
  auto d = place_prompt(p, counting_prompt(0));
  CHECK(d.engine_used_kv_blocks == 120);
  auto v = p.view();
  REQUIRE(v.size() == 1);
  CHECK(v[0].engine_used_kv_blocks == 120);
  CHECK(v[0].engine_total_kv_blocks == 1000);
  p.release(d.key);
  // A report older than engine_load_fresh (3 s) is not believed.
  clk.t += 4s;
  auto stale = place_prompt(p, counting_prompt(0));
  CHECK(stale.engine_used_kv_blocks == -1);
  p.release(stale.key);
  // One that says it holds longer (a large fleet polled less often) is,
  // that long and no longer.
  engine_load slow{"a", {{0, 80, 1000}}};
  slow.fresh_for = 30s;
  p.engine_reported(slow);
  clk.t += 29s;
  auto held = place_prompt(p, counting_prompt(0));
  CHECK(held.engine_used_kv_blocks == 80);
  p.release(held.key);
  clk.t += 2s;
  CHECK(place_prompt(p, counting_prompt(0)).engine_used_kv_blocks == -1);
}

TEST_CASE("placement: a request counted on cached blocks that a rank reset "
          "drops before it is prefilled has them predicted instead",
          "[placement]") {
  manual_clock clk;
  placement p{mode("kv"), clk.fn(), 1};
  p.add_worker(worker("a"));
  p.add_worker(worker("b"));
  auto tokens = counting_prompt(900);
  kv::block_stored stored;
  stored.block_size = 4;
  stored.token_ids = tokens;
  stored.block_hashes = {3000, 3001, 3002, 3003};
  REQUIRE(p.apply_events({"a", 0, false, {stored}}));
  auto held = place_prompt(p, tokens);
  REQUIRE(held.worker_id == "a");
  CHECK(held.overlap_blocks == 4);
  // The engine restarted its numbering: the index forgets the rank, but
  // the queued request will compute its blocks there.
  REQUIRE(p.apply_events({"a", 0, true, {}}));
  auto follower = place_prompt(p, tokens);
  CHECK(follower.worker_id == "a");
  CHECK(follower.overlap_blocks == 0);
  CHECK(follower.chosen_overlap_blocks == 4);
  p.release(follower.key);
  p.release(held.key);
}

TEST_CASE("placement: an adapter's request goes only to workers serving the "
          "adapter, and is keyed by it",
          "[placement]") {
  manual_clock clk;
  placement p{mode("kv"), clk.fn(), 1};
  auto with_sql = worker("a");
  with_sql.lora_adapters = {"sql"};
  p.add_worker(with_sql);
  p.add_worker(worker("b"));
  route_request req;
  req.tokens = counting_prompt(100);
  req.identity.lora = "sql";
  for (int i = 0; i < 8; ++i) {
    auto d = p.place(req);
    REQUIRE(d.ok);
    CHECK(d.worker_id == "a");
    p.release(d.key);
  }
  req.identity.lora = "chat";
  auto none = p.place(req);
  CHECK_FALSE(none.ok);
  CHECK(none.error.find("serving adapter 'chat'") != std::string::npos);
  // Blocks of the adapter do not match the base model's prompt.
  kv::block_stored s;
  s.block_hashes = {1, 2, 3, 4};
  s.token_ids = counting_prompt(100);
  s.block_size = 4;
  s.lora_name = "sql";
  REQUIRE(p.apply_events(worker_events{"b", 0, false, {s}}));
  auto base = place_prompt(p, counting_prompt(100));
  REQUIRE(base.ok);
  CHECK(base.overlap_blocks == 0);
  req.identity.lora = "sql";
  auto lora_on_b = p.place(req); // b does not serve it: a, no overlap
  CHECK(lora_on_b.worker_id == "a");
}

TEST_CASE("placement: the tick's tidy finishes an index growth that "
          "events left pending",
          "[placement]") {
  // 82,850 blocks of one rank: the GPU tier's block table (118,342 slots)
  // passes its 70% limit with the last batch and asks for its next arrays;
  // no event comes after it to take them.
  manual_clock clk;
  placement p{mode("kv"), clk.fn(), 1};
  p.add_worker(worker("a"));
  report_stored(p, "a", counting_prompt(0, 4 * 82850), 1000);
  CHECK(p.tidy(1)); // pending: the helper at work, or the move
  auto deadline = std::chrono::steady_clock::now() + 20s;
  while (p.tidy(65536) && std::chrono::steady_clock::now() < deadline) {
  }
  CHECK_FALSE(p.tidy(65536));
  CHECK(p.index().held(0) == 82850);
  CHECK(place_prompt(p, counting_prompt(0, 64)).chosen_overlap_blocks == 16);
}
