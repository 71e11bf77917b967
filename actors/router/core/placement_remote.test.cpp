#include <catch2/catch.hpp>

#include "actors/router/core/placement.hpp"
#include "actors/router/core/placement_fixtures.hpp"
#include "cluster/nats_bookings.hpp"

using namespace outrider;
using namespace outrider::router;
using namespace outrider::router::test;
using namespace std::chrono_literals;
using note_op = cluster::booking_note::op;

namespace {

cluster::booking_note add(std::string router, uint64_t key, std::string w,
                          uint64_t prefill, uint64_t decode) {
  cluster::booking_note n;
  n.what = note_op::add;
  n.router_id = std::move(router);
  n.key = key;
  n.worker_id = std::move(w);
  n.prefill_tokens = prefill;
  n.decode_blocks = decode;
  return n;
}

cluster::booking_note op(note_op what, std::string router, uint64_t key) {
  cluster::booking_note n;
  n.what = what;
  n.router_id = std::move(router);
  n.key = key;
  return n;
}

// The worker of the slot booked most.
uint32_t slot_of(placement& p, const std::string& id) {
  for (uint32_t s = 0; s < p.slots(); ++s)
    if (p.load(s).worker_id == id)
      return s;
  FAIL("no slot for " << id);
  return 0;
}

} // namespace

TEST_CASE("placement: another router's bookings count in the load and "
          "steer placement away",
          "[placement]") {
  manual_clock clk;
  placement p{router_config{}, clk.fn(), 1};
  p.add_worker(worker("a"));
  p.add_worker(worker("b"));
  auto a = slot_of(p, "a");
  REQUIRE(p.remote(add("r2", 7, "a", 400, 100)) == a);
  CHECK(p.load(a).prefill_tokens == 400);
  CHECK(p.load(a).decode_blocks == 100);
  // A new request goes to the worker the other router did not load.
  route_request req;
  req.tokens = std::vector<uint32_t>(16, 3);
  auto d = p.place(req);
  REQUIRE(d.ok);
  CHECK(d.worker_id == "b");
  // Its prompt computed, then done: the load goes as with local bookings.
  REQUIRE(p.remote(op(note_op::prefilled, "r2", 7)) == a);
  CHECK(p.load(a).prefill_tokens == 0);
  CHECK(p.load(a).decode_blocks == 100);
  REQUIRE(p.remote(op(note_op::release, "r2", 7)) == a);
  CHECK(p.load(a).decode_blocks == 0);
  // Duplicates, unknown keys, unknown workers change nothing.
  CHECK(!p.remote(op(note_op::release, "r2", 7)));
  CHECK(!p.remote(add("r2", 8, "nobody", 1, 1)));
  REQUIRE(p.remote(add("r2", 9, "a", 5, 5)));
  CHECK(!p.remote(add("r2", 9, "a", 5, 5)));
  CHECK(p.load(a).prefill_tokens == 5);
}

TEST_CASE("placement: a silent router's bookings are forgotten",
          "[placement]") {
  manual_clock clk;
  placement p{router_config{}, clk.fn(), 1};
  p.add_worker(worker("a"));
  auto a = slot_of(p, "a");
  p.remote(add("r2", 1, "a", 10, 10));
  p.remote(add("r3", 1, "a", 20, 20));
  CHECK(p.load(a).prefill_tokens == 30);
  clk.t += 4s;
  p.remote(op(note_op::alive, "r3", 0)); // r3 speaks, r2 does not
  clk.t += 2s;
  CHECK(p.expire_remote(clk.t - 5s) == 1);
  CHECK(p.load(a).prefill_tokens == 20);
  CHECK(p.load(a).decode_blocks == 20);
}

TEST_CASE("booking notes: round trip, and malformed ones refused",
          "[placement]") {
  auto n = add("r1", 42, "w", 1, 2);
  n.rank = 3;
  n.blocks = {1, 2, 18446744073709551615ULL};
  n.session = "conversation-7";
  auto back = cluster::booking_from_json(cluster::to_json(n));
  REQUIRE(back);
  CHECK(back->what == note_op::add);
  CHECK(back->router_id == "r1");
  CHECK(back->key == 42);
  CHECK(back->rank == 3);
  CHECK(back->blocks == n.blocks);
  CHECK(back->session == "conversation-7");
  // A session too long for a note is not sent.
  n.session = std::string(cluster::max_note_session_bytes + 1, 's');
  CHECK(cluster::booking_from_json(cluster::to_json(n))->session.empty());
  for (const char* bad :
       {"", "[]", "{\"op\":\"add\"}",
        "{\"op\":\"steal\",\"router\":\"r\","
        "\"key\":1}",
        "{\"op\":\"add\",\"router\":\"r\",\"key\":1,\"worker\":\"w\","
        "\"rank\":-1,\"prefill_tokens\":1,\"decode_blocks\":1,\"blocks\":[]}",
        "{\"op\":\"add\",\"router\":\"r\",\"key\":1,\"worker\":\"w\","
        "\"rank\":0,\"prefill_tokens\":1,\"decode_blocks\":1,\"blocks\":"
        "[\"x\"]}",
        "{\"op\":\"release\",\"router\":\"\",\"key\":1}",
        "{\"op\":\"add\",\"router\":\"r\",\"key\":1,\"worker\":\"w\","
        "\"rank\":0,\"prefill_tokens\":1,\"decode_blocks\":1,\"blocks\":"
        "[],\"session\":7}",
        "{\"op\":\"release\",\"router\":\"r\",\"key\":-4}"}) {
    std::string why;
    CHECK_FALSE(cluster::booking_from_json(bad, &why));
    CHECK(!why.empty());
  }
}

TEST_CASE("placement: a session another router placed goes to the same "
          "worker here (session affinity shared), unless affinity is off",
          "[placement]") {
  for (auto mode : {session_mode::hard, session_mode::off}) {
    manual_clock clk;
    router_config cfg;
    cfg.session.mode = mode;
    placement p{cfg, clk.fn(), 1};
    p.add_worker(worker("a"));
    p.add_worker(worker("b"));
    // r2 placed a turn of "s1" on b, and that booking is over.
    auto n = add("r2", 1, "b", 10, 10);
    n.session = "s1";
    REQUIRE(p.remote(n));
    p.remote(op(note_op::release, "r2", 1));
    // Here b is loaded, a is free: the session's next turn still goes to
    // b with affinity; without, to a.
    route_request load;
    load.tokens = std::vector<uint32_t>(64, 9);
    load.exclude = {"a"};
    REQUIRE(p.place(load).worker_id == "b");
    route_request turn;
    turn.tokens = std::vector<uint32_t>(16, 3);
    turn.session = "s1";
    auto d = p.place(turn);
    REQUIRE(d.ok);
    CHECK(d.worker_id == (mode == session_mode::hard ? "b" : "a"));
  }
}
