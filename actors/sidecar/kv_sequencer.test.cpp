#include "actors/sidecar/kv_sequencer.hpp"

#include <catch2/catch.hpp>

using outrider::sidecar::kv_sequencer;
using verdict = kv_sequencer::verdict;

TEST_CASE("kv_sequencer: live batches in order are applied, "
          "old ones are duplicates, later ones a gap",
          "[kv_sequencer]") {
  kv_sequencer s{5};
  CHECK(s.classify(4) == verdict::duplicate);
  CHECK(s.classify(5) == verdict::apply);
  CHECK(s.classify(6) == verdict::gap);
  s.applied(5);
  CHECK(s.next() == 6);
  CHECK(s.classify(5) == verdict::duplicate);
  CHECK(s.classify(6) == verdict::apply);
}

TEST_CASE("kv_sequencer: a replay that covers the gap applies exactly the "
          "missing batches once",
          "[kv_sequencer]") {
  kv_sequencer s{3};
  // The engine answers from 3; a duplicate 4 and an out-of-order 9 are
  // skipped.
  auto plan = s.plan_replay({3, 4, 4, 5, 9, 6});
  CHECK_FALSE(plan.lost);
  CHECK(plan.apply == std::vector<size_t>{0, 1, 3, 5});
  CHECK(s.next() == 7);
  CHECK(s.classify(7) == verdict::apply);
}

TEST_CASE("kv_sequencer: history older than the engine's buffer is lost",
          "[kv_sequencer]") {
  kv_sequencer s{10};
  auto plan = s.plan_replay({14, 15});
  REQUIRE(plan.lost);
  CHECK(plan.lost_from == 10);
  CHECK(plan.resume == 14);
  CHECK(plan.apply == std::vector<size_t>{0, 1});
  CHECK(s.next() == 16);
}

TEST_CASE("kv_sequencer: an empty replay answer is not lost history",
          "[kv_sequencer]") {
  kv_sequencer s{10};
  auto plan = s.plan_replay({});
  CHECK_FALSE(plan.lost);
  CHECK(plan.apply.empty());
  CHECK(s.next() == 10);
  // A live batch far ahead then stays a gap (the caller rejects it).
  CHECK(s.classify(50) == verdict::gap);
}

TEST_CASE("kv_sequencer: a gap no replay covered is lost history, and the "
          "stream goes on from the live batch",
          "[kv_sequencer]") {
  kv_sequencer s{10};
  auto plan = s.plan_unanswered(13);
  REQUIRE(plan.lost);
  CHECK(plan.lost_from == 10);
  CHECK(plan.resume == 13);
  CHECK(s.classify(13) == verdict::apply);
  s.applied(13);
  CHECK(s.classify(14) == verdict::apply);
  // Nothing ahead: nothing lost.
  CHECK_FALSE(s.plan_unanswered(14).lost);
  CHECK_FALSE(s.plan_unanswered(2).lost);
  CHECK(s.next() == 14);
}

TEST_CASE("kv_sequencer: resync moves only when the indexer disagrees",
          "[kv_sequencer]") {
  kv_sequencer s{8};
  CHECK_FALSE(s.resync(8));
  CHECK(s.resync(3));
  CHECK(s.next() == 3);
  CHECK(s.classify(3) == verdict::apply);
}
