// The router's predicted blocks: what it books on a rank for a request
// it placed there, until the engine's KV events say what it holds.
#include <catch2/catch.hpp>

#include "actors/router/core/placement.hpp"
#include "actors/router/core/placement_fixtures.hpp"

using namespace outrider;
using namespace outrider::router;
using namespace outrider::router::test;
using namespace std::chrono_literals;

namespace {

// Workers a and b, kv mode, predictions lasting `ttl` past the first
// token, on a clock the test moves.
struct two_workers {
  manual_clock clk;
  placement p;
  explicit two_workers(std::chrono::milliseconds ttl)
    : p{config(ttl), clk.fn(), 1} {
    p.add_worker(worker("a"));
    p.add_worker(worker("b"));
  }
  static router_config config(std::chrono::milliseconds ttl) {
    router_config c;
    c.mode = engine::router_mode_of("kv").value();
    c.prediction_ttl = ttl;
    return c;
  }
};

} // namespace

TEST_CASE("placement: predicted blocks hold a prefix until they expire",
          "[placement]") {
  two_workers fleet{5s};
  auto& [clk, p] = fleet;
  auto first = place_prompt(p, counting_prompt(0));
  REQUIRE(first.ok);
  CHECK(first.prompt_blocks == 4);
  CHECK(first.overlap_blocks == 0); // the index knows nothing yet
  p.prefilled(first.key);
  // Before any KV event: the prediction makes the same rank the cheapest
  // (its decode blocks are shared, the other rank would prefill all).
  clk.t += 4s;
  auto again = place_prompt(p, counting_prompt(0));
  CHECK(again.worker_id == first.worker_id);
  CHECK(again.chosen_overlap_blocks == 4);
  p.release(again.key);
  // Past the lifetime (counted from the last prefill) the prediction is
  // gone; the first request still holds its blocks there, so the other rank
  // is cheaper now.
  clk.t += 4s;
  auto third = place_prompt(p, counting_prompt(0));
  CHECK(third.worker_id == first.worker_id); // refreshed at 4s
  p.release(third.key);
  clk.t += 6s;
  auto later = place_prompt(p, counting_prompt(0));
  CHECK(later.worker_id != first.worker_id);
}

TEST_CASE("placement: a prefix stays predicted while its request waits, "
          "however long the queue",
          "[placement]") {
  two_workers fleet{2s};
  auto& [clk, p] = fleet;
  auto first = place_prompt(p, counting_prompt(0));
  REQUIRE(first.ok);
  // A minute in the engine's queue: never prefilled, no KV event yet. A
  // request with the same prefix still goes where it will be computed,
  // and is booked as reusing it (only its own blocks to prefill).
  clk.t += 60s;
  auto second = place_prompt(p, counting_prompt(0));
  CHECK(second.worker_id == first.worker_id);
  CHECK(second.chosen_overlap_blocks == 4);
  CHECK(second.overlap_blocks == 0); // the index itself knows nothing
  CHECK(p.load(second.slot).prefill_tokens == counting_prompt(0).size());
  // Once both are prefilled the prediction lasts the TTL, then goes.
  p.prefilled(first.key);
  p.prefilled(second.key);
  clk.t += 1s;
  auto third = place_prompt(p, counting_prompt(0));
  CHECK(third.chosen_overlap_blocks == 4);
  p.release(third.key);
  clk.t += 60s;
  p.release(first.key);
  p.release(second.key);
  auto last = place_prompt(p, counting_prompt(0));
  CHECK(last.chosen_overlap_blocks == 0);
}

TEST_CASE("placement: an eviction the engine reports ends a prediction at "
          "once, but not a queued request's",
          "[placement]") {
  two_workers fleet{5s};
  auto& [clk, p] = fleet;
  auto tokens = counting_prompt(700);
  auto first = place_prompt(p, tokens);
  REQUIRE(first.ok);
  p.prefilled(first.key);
  p.release(first.key);
  // The engine stores the prompt's blocks, then evicts them, well within
  // the prediction's 5 s.
  worker_events ev;
  ev.worker_id = first.worker_id;
  kv::block_stored stored;
  stored.block_size = 4;
  stored.token_ids = tokens;
  kv::block_removed removed;
  for (uint64_t i = 0; i < 4; ++i) {
    stored.block_hashes.push_back(2000 + i);
    removed.block_hashes.push_back(2000 + i);
  }
  ev.events = {stored};
  REQUIRE(p.apply_events(ev));
  clk.t += 1s;
  auto held = place_prompt(p, tokens);
  CHECK(held.overlap_blocks == 4); // the index has them
  // Queued there, not yet prefilled: a removal does not undo this request's
  // own prediction (it will compute the blocks again).
  ev.events = {removed};
  REQUIRE(p.apply_events(ev));
  auto follower = place_prompt(p, tokens);
  CHECK(follower.worker_id == held.worker_id);
  CHECK(follower.chosen_overlap_blocks == 4);
  CHECK(follower.overlap_blocks == 0);
  p.release(follower.key);
  p.prefilled(held.key);
  p.release(held.key);
  // Computed again, stored and evicted again: nothing is predicted any
  // more, though its TTL has not run out.
  ev.events = {stored, removed};
  REQUIRE(p.apply_events(ev));
  clk.t += 1s;
  auto after = place_prompt(p, tokens);
  CHECK(after.chosen_overlap_blocks == 0);
  CHECK(after.best_overlap_blocks == 0);
}

TEST_CASE("placement: a prediction whose blocks the index holds before its "
          "request is prefilled goes then, not after the TTL",
          "[placement]") {
  two_workers fleet{5s};
  auto& [clk, p] = fleet;
  // The engine publishes the blocks before its first token arrives here.
  auto tokens = counting_prompt(1100);
  auto d = place_prompt(p, tokens);
  REQUIRE(d.ok);
  CHECK(p.predicted_blocks() == 4);
  report_stored(p, d.worker_id, tokens, 4000);
  CHECK(p.predicted_blocks() == 4); // still computing: it stays
  p.prefilled(d.key);
  CHECK(p.predicted_blocks() == 0);
  auto again = place_prompt(p, tokens);
  CHECK(again.worker_id == d.worker_id);
  CHECK(again.overlap_blocks == 4); // the index's, as before
  p.release(again.key);
  p.release(d.key);

  // The other order (first token, then the events) ends the same way.
  auto other = counting_prompt(1200);
  auto e = place_prompt(p, other);
  REQUIRE(e.ok);
  p.prefilled(e.key);
  CHECK(p.predicted_blocks() == 4);
  report_stored(p, e.worker_id, other, 5000);
  CHECK(p.predicted_blocks() == 0);
  p.release(e.key);

  // Stored, then the rank reset before the first token: what the index
  // held is gone, so the prediction stays for its TTL.
  auto third = counting_prompt(1300);
  auto f = place_prompt(p, third);
  REQUIRE(f.ok);
  report_stored(p, f.worker_id, third, 6000);
  REQUIRE(p.apply_events({f.worker_id, 0, true, {}}));
  p.prefilled(f.key);
  p.release(f.key);
  CHECK(p.predicted_blocks() == 4);
  clk.t += 1s;
  auto follower = place_prompt(p, third);
  CHECK(follower.worker_id == f.worker_id);
  CHECK(follower.chosen_overlap_blocks == 4);
  CHECK(follower.overlap_blocks == 0);
}
