#include "actors/router/brain/kv_router.hpp"

#include <caf/all.hpp>
#include <catch2/catch.hpp>

using namespace outrider;
using namespace outrider::router;
using namespace std::chrono_literals;

namespace {

struct fixture {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  caf::scheduler::test_coordinator* sched = nullptr;
  std::unique_ptr<caf::scoped_actor> self;
  kv_router_actor router;

  explicit fixture(std::string mode = "kv",
                   std::optional<double> queue_threshold = std::nullopt) {
    cfg.set("scheduler.policy", caf::atom("testing"));
    cfg.set("logger.verbosity", caf::atom("quiet"));
    sys = std::make_unique<caf::actor_system>(cfg);
    sched = &dynamic_cast<caf::scheduler::test_coordinator&>(sys->scheduler());
    self = std::make_unique<caf::scoped_actor>(*sys);
    router_config rc;
    rc.mode = engine::router_mode_of(mode).value();
    rc.queue_threshold = queue_threshold;
    router = spawn_kv_router(*sys, rc);
    sched->run();
  }

  ~fixture() {
    caf::anon_send_exit(router, caf::exit_reason::user_shutdown);
    sched->run();
  }

  void worker(const std::string& id, const std::string& role = "aggregated",
              uint32_t ranks = 1) {
    cluster::worker_record r;
    r.worker_id = id;
    r.instance_id = "i-" + id;
    r.model = "m";
    r.role = engine::worker_role_of(role).value();
    r.relay_endpoint = id + ":1";
    r.engine_endpoint = id + ":2";
    r.protocol = "openengine";
    r.kv_block_size = 4;
    r.total_kv_blocks = 1000;
    r.data_parallel_size = ranks;
    caf::anon_send(router, worker_up_atom::value, r);
    sched->run();
  }

  route_decision place(std::vector<uint32_t> tokens, std::string role = {}) {
    auto req = std::make_shared<route_request>();
    req->tokens = std::move(tokens);
    if (!role.empty())
      req->role = engine::worker_role_of(role).value();
    (*self)->send(router, place_atom::value,
                  std::shared_ptr<const route_request>{req});
    sched->run();
    route_decision d;
    (*self)->receive([&](route_decision& r) { d = std::move(r); },
                     caf::after(0s) >> [] {});
    return d;
  }

  void release(uint64_t key) {
    caf::anon_send(router, release_atom::value, key);
    sched->run();
  }
};

std::vector<uint32_t> prompt(uint32_t first, size_t n = 16) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < n; ++i)
    out.push_back(first + static_cast<uint32_t>(i));
  return out;
}

} // namespace

TEST_CASE("a prefix just routed is predicted before its events arrive") {
  fixture f;
  f.worker("a");
  f.worker("b");
  // No KV events ever arrive here: only predictions can keep a prefix
  // together (without them every second placement would be a coin toss).
  for (uint32_t i = 0; i < 30; ++i) {
    auto first = f.place(prompt(1000 * i));
    REQUIRE(first.ok);
    f.release(first.key);
    auto second = f.place(prompt(1000 * i));
    REQUIRE(second.ok);
    CHECK(second.worker_id == first.worker_id);
    f.release(second.key);
  }
}

TEST_CASE("KV events steer requests to the worker holding the prefix") {
  fixture f;
  f.worker("a");
  f.worker("b", "aggregated", 2);
  auto p = prompt(5);
  auto ev = std::make_shared<worker_events>();
  ev->worker_id = "b";
  ev->rank = 1;
  ev->events.push_back(kv::block_stored{
    {11, 12, 13}, std::nullopt, {p.begin(), p.begin() + 12}, 4});
  caf::anon_send(f.router, kv_events_atom::value,
                 std::shared_ptr<const worker_events>{ev});
  f.sched->run();
  auto d = f.place(p);
  REQUIRE(d.ok);
  CHECK(d.worker_id == "b");
  CHECK(d.rank == 1);
  CHECK(d.overlap_blocks == 3);
  CHECK(d.prompt_blocks == 4);
}

TEST_CASE("workers leave, roles filter, round-robin alternates") {
  fixture f{"round-robin"};
  f.worker("a");
  f.worker("p", "prefill");
  f.worker("d", "decode");
  std::set<std::string> any;
  for (int i = 0; i < 4; ++i)
    any.insert(f.place(prompt(1)).worker_id);
  CHECK(any == std::set<std::string>{"a", "d"}); // never the prefill worker
  CHECK(f.place(prompt(1), "prefill").worker_id == "p");
  CHECK(f.place(prompt(1), "decode").worker_id == "d");
  caf::anon_send(f.router, worker_down_atom::value, std::string{"d"});
  f.sched->run();
  CHECK_FALSE(f.place(prompt(1), "decode").ok);
  for (int i = 0; i < 3; ++i)
    CHECK(f.place(prompt(1)).worker_id == "a");
}

TEST_CASE("workers with another block size are refused") {
  fixture f;
  f.worker("a");
  cluster::worker_record odd;
  odd.worker_id = "odd";
  odd.instance_id = "x";
  odd.model = "m";
  odd.relay_endpoint = "odd:1";
  odd.kv_block_size = 16;
  odd.data_parallel_size = 1;
  caf::anon_send(f.router, worker_up_atom::value, odd);
  f.sched->run();
  for (int i = 0; i < 5; ++i)
    CHECK(f.place(prompt(static_cast<uint32_t>(i) * 100)).worker_id == "a");
}

TEST_CASE("above the queue threshold everywhere, requests wait") {
  fixture f{"kv", 10.0};
  f.worker("a");
  f.worker("b");
  auto d1 = f.place(prompt(100)); // 16 prompt tokens queued on one worker
  auto d2 = f.place(prompt(200)); // ... and on the other
  REQUIRE(d1.ok);
  REQUIRE(d2.ok);
  CHECK(d1.worker_id != d2.worker_id);
  auto d3 = f.place(prompt(300));
  CHECK_FALSE(d3.ok);
  CHECK(d3.busy);
  // Once one worker has computed its prompt, it takes requests again.
  caf::anon_send(f.router, prefilled_atom::value, d1.key);
  f.sched->run();
  auto d4 = f.place(prompt(300));
  REQUIRE(d4.ok);
  CHECK(d4.worker_id == d1.worker_id);
}
