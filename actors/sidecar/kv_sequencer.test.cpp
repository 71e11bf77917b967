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

using batches = std::vector<std::pair<uint64_t, std::string>>;

TEST_CASE("kv_sequencer: a near gap no replay covered is lost history, and "
          "the stream goes on from the live batch",
          "[kv_sequencer]") {
  kv_sequencer s{10};
  auto plan = s.stray(13, "c");
  REQUIRE(plan.adopt);
  CHECK(plan.reset.lost_from == 10);
  CHECK(plan.reset.resume == 13);
  CHECK(plan.apply == batches{{13, "c"}});
  CHECK(s.classify(13) == verdict::apply);
  s.applied(13);
  CHECK(s.classify(14) == verdict::apply);
  CHECK(s.held() == 0);
}

TEST_CASE("kv_sequencer: one far-ahead sequence is held, never followed "
          "alone, and the expected one gives it up",
          "[kv_sequencer]") {
  kv_sequencer s{10};
  auto plan = s.stray(uint64_t{1} << 63, "bogus");
  CHECK_FALSE(plan.adopt);
  CHECK(s.held() == 1);
  CHECK(s.next() == 10);
  CHECK(s.classify(10) == verdict::apply);
  CHECK(s.settle() == 1);
  s.applied(10);
  CHECK(s.classify(11) == verdict::apply);
  // A run broken by another far sequence starts again.
  CHECK_FALSE(s.stray(500000, "a").adopt);
  auto other = s.stray(700000, "b");
  CHECK_FALSE(other.adopt);
  CHECK(other.dropped == 1);
  // The largest sequence has no successor.
  s.settle();
  CHECK_FALSE(s.stray(UINT64_MAX, "m").adopt);
  auto wrapped = s.stray(0, "z");
  CHECK_FALSE(wrapped.adopt);
  CHECK(wrapped.dropped == 1);
}

TEST_CASE("kv_sequencer: a confirmed far-ahead run resets the rank and is "
          "applied from its start",
          "[kv_sequencer]") {
  kv_sequencer s{10};
  CHECK_FALSE(s.stray(100000, "a").adopt);
  auto plan = s.stray(100001, "b");
  REQUIRE(plan.adopt);
  CHECK(plan.reset.lost_from == 10);
  CHECK(plan.reset.resume == 100000);
  CHECK(plan.apply == batches{{100000, "a"}, {100001, "b"}});
  CHECK(s.next() == 100000);
}

TEST_CASE("kv_sequencer: a publisher numbering from 0 again is followed "
          "after three batches, and a replay's echo is only a duplicate",
          "[kv_sequencer]") {
  kv_sequencer s{1000};
  CHECK(s.classify(0) == verdict::duplicate);
  CHECK_FALSE(s.echo(0));
  CHECK_FALSE(s.stray(0, "a").adopt);
  CHECK_FALSE(s.stray(1, "b").adopt);
  auto plan = s.stray(2, "c");
  REQUIRE(plan.adopt);
  CHECK(plan.reset.resume == 0);
  CHECK(plan.reset.lost_from == 1000);
  CHECK(plan.apply == batches{{0, "a"}, {1, "b"}, {2, "c"}});
  for (auto& [seq, _] : plan.apply)
    s.applied(seq);
  CHECK(s.next() == 3);
  // After a replay from 3 that applied 3..5, live 3..5 are its echo.
  s.plan_replay({3, 4, 5});
  CHECK(s.echo(4));
  CHECK_FALSE(s.echo(2));
  CHECK_FALSE(s.echo(6));
  // The indexer raising the expectation: what lies between is an echo.
  CHECK(s.resync(9));
  CHECK(s.echo(7));
}

TEST_CASE("kv_sequencer: resync moves only when the indexer disagrees",
          "[kv_sequencer]") {
  kv_sequencer s{8};
  CHECK_FALSE(s.resync(8));
  CHECK(s.resync(3));
  CHECK(s.next() == 3);
  CHECK(s.classify(3) == verdict::apply);
}
