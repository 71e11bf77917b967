#include "actors/router/core/session_table.hpp"

#include <catch2/catch.hpp>

#include "actors/router/core/placement_fixtures.hpp"

using namespace outrider::router;
using namespace std::chrono_literals;

TEST_CASE("session table: remembered until the TTL, the least recently "
          "used out first beyond the cap") {
  session_config cfg;
  cfg.ttl = 10s;
  cfg.cap = 2;
  session_table t{cfg};
  session_table::clock::time_point now{};
  t.remember("a", {"w1", 1}, now);
  t.remember("b", {"w2", 2}, now);
  CHECK(t.find("a", now + 1s)->worker_id == "w1"); // finding does not refresh
  t.remember("a", {"w1", 1}, now + 2s);            // a turn refreshes
  t.remember("c", {"w3", 3}, now + 3s);            // b is the oldest: out
  CHECK(t.size() == 2);
  CHECK_FALSE(t.find("b", now + 3s));
  CHECK(t.find("a", now + 11s)->slot == 1u);
  CHECK_FALSE(t.find("a", now + 13s)); // 11 s since its last turn
  CHECK(t.size() == 1);
}

namespace {

// Two workers; the session's first turn goes to one of them; then that
// worker gets busy with another request's prompt.
struct two_workers {
  test::manual_clock clock;
  placement p;
  explicit two_workers(session_mode mode)
    : p{[&] {
          router_config cfg;
          cfg.session.mode = mode;
          return cfg;
        }(),
        clock.fn(), 1} {
    p.add_worker(test::worker("a"));
    p.add_worker(test::worker("b"));
  }
  // One turn of a session, done at once (its booking released).
  route_decision turn(const std::string& session, uint32_t first,
                      size_t length = 8) {
    route_request r;
    for (size_t i = 0; i < length; ++i)
      r.tokens.push_back(first + static_cast<uint32_t>(i));
    r.session = session;
    auto d = p.place(r);
    if (d.ok)
      p.release(d.key);
    return d;
  }
};

} // namespace

TEST_CASE("session affinity: hard keeps a session on its worker whatever "
          "the load, soft lets it go when the worker is far costlier") {
  for (auto mode : {session_mode::hard, session_mode::soft}) {
    two_workers w{mode};
    auto first = w.turn("s1", 100);
    REQUIRE(first.ok);
    CHECK(first.session_outcome == "new");
    // Unrelated prompts (no shared prefix) still follow the session.
    for (uint32_t t = 1; t <= 5; ++t) {
      auto next = w.turn("s1", 1000 * t);
      CHECK(next.worker_id == first.worker_id);
      CHECK(next.session_outcome == "kept");
    }
    // A long prompt loads the session's worker (booked, not prefilled).
    route_request heavy;
    for (uint32_t i = 0; i < 4000; ++i)
      heavy.tokens.push_back(50000 + i);
    heavy.exclude = {first.worker_id == "a" ? "b" : "a"};
    auto load = w.p.place(heavy);
    REQUIRE(load.worker_id == first.worker_id);
    auto after = w.turn("s1", 9000);
    if (mode == session_mode::hard) {
      CHECK(after.worker_id == first.worker_id);
      CHECK(after.session_outcome == "kept");
    } else {
      CHECK(after.worker_id != first.worker_id);
      CHECK(after.session_outcome == "moved");
      // And it stays where it moved.
      CHECK(w.turn("s1", 9100).worker_id == after.worker_id);
    }
  }
}

TEST_CASE("session affinity: off, or no session, changes nothing") {
  two_workers off{session_mode::off};
  CHECK(off.turn("s1", 100).session_outcome.empty());
  two_workers hard{session_mode::hard};
  CHECK(hard.turn("", 100).session_outcome.empty());
}
