#include "actors/router/watch/load_poller.hpp"

#include <catch2/catch.hpp>

using namespace std::chrono_literals;
using outrider::router::poll_round;

TEST_CASE("load polls: a round spread evenly, slower than a second only "
          "where the fleet would exceed the rate") {
  auto small = poll_round::of(100, 1s, 1000);
  CHECK(small.period == 1000ms);
  CHECK(small.due(0) == 0ms);
  CHECK(small.due(1) == 10ms);
  CHECK(small.due(50) == 500ms);
  CHECK(small.due(99) == 990ms);
  CHECK(small.fresh_for() == 3000ms);

  // 10,000 workers at 1,000 a second: each asked every 10 s, its report
  // believed for 30 s.
  auto fleet = poll_round::of(10000, 1s, 1000);
  CHECK(fleet.period == 10000ms);
  CHECK(fleet.due(1) == 1ms);
  CHECK(fleet.due(9999) == 9999ms);
  CHECK(fleet.fresh_for() == 30000ms);
  // Never more than the rate in any second of the round.
  for (size_t second = 0; second < 10; ++second) {
    size_t in_it = 0;
    for (size_t i = 0; i < fleet.n; ++i)
      if (fleet.due(i) >= std::chrono::milliseconds{1000 * second} &&
          fleet.due(i) < std::chrono::milliseconds{1000 * (second + 1)})
        ++in_it;
    CHECK(in_it <= 1000);
  }

  CHECK(poll_round::of(1001, 1s, 1000).period == 1001ms); // rounded up
  CHECK(poll_round::of(0, 1s, 1000).period == 1000ms);
  CHECK(poll_round::of(0, 1s, 1000).due(0) == 0ms);
  CHECK(poll_round::of(50000, 1s, 0).period == 1000ms); // 0: no cap
  CHECK(poll_round::of(10, 250ms, 1000).period == 250ms);
}
