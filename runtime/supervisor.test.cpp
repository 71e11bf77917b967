#include "runtime/supervisor.hpp"

#include <caf/all.hpp>
#include <catch2/catch.hpp>

#include "runtime/actor_slot.hpp"
#include "runtime/errors.hpp"

using namespace outrider::runtime;
using namespace std::chrono_literals;

namespace {

using fail_atom = caf::atom_constant<caf::atom("fail")>;
using ping_atom = caf::atom_constant<caf::atom("ping")>;

caf::behavior worker(caf::event_based_actor* self) {
  return {
    [=](fail_atom) { self->quit(caf::make_error(caf::sec::runtime_error)); },
    [=](ping_atom, int32_t x) { return x + 1; },
  };
}

struct stats {
  uint64_t restarts = 0;
  caf::timespan next_backoff{0};
  bool running = false;
};

// Runs a supervisor under CAF's test coordinator: virtual time, every
// message processed only when the test says so.
struct fixture {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  caf::scheduler::test_coordinator* sched = nullptr;
  std::unique_ptr<caf::scoped_actor> self;
  caf::actor sup;
  // Where every incarnation of the child is published.
  slot_ptr<caf::actor> slot = std::make_shared<actor_slot<caf::actor>>();

  explicit fixture(supervisor_policy policy) {
    cfg.set("scheduler.policy", caf::atom("testing"));
    cfg.set("logger.verbosity", caf::atom("quiet"));
    sys = std::make_unique<caf::actor_system>(cfg);
    sched = &dynamic_cast<caf::scheduler::test_coordinator&>(sys->scheduler());
    self = std::make_unique<caf::scoped_actor>(*sys);
    sup = spawn_supervisor(
      *sys, policy, {supervised("worker", slot, [](caf::actor_system& s) {
        return s.spawn(worker);
      })});
    sched->run();
  }

  ~fixture() {
    caf::anon_send_exit(sup, caf::exit_reason::user_shutdown);
    sched->run();
  }

  void fail_child() {
    (*self)->send(slot->get(), fail_atom::value);
    sched->run();
  }

  // Asks the child's current incarnation to add one to `x`.
  int32_t ping(int32_t x) {
    (*self)->send(slot->get(), ping_atom::value, x);
    sched->run();
    int32_t reply = 0;
    (*self)->receive([&](int32_t r) { reply = r; }, caf::after(0s) >> [] {});
    return reply;
  }

  void advance(caf::timespan d) {
    sched->advance_time(d);
    sched->run();
  }

  stats query() {
    stats out;
    (*self)->send(sup, stats_atom::value, "worker");
    sched->run();
    bool got = false;
    (*self)->receive(
      [&](uint64_t r, caf::timespan b, bool running) {
        out = stats{r, b, running};
        got = true;
      },
      caf::after(0s) >> [] {});
    REQUIRE(got);
    return out;
  }
};

supervisor_policy test_policy() {
  supervisor_policy p;
  p.initial_backoff = 100ms;
  p.max_backoff = 400ms;
  p.stable_period = 5s;
  p.max_restarts = 100;
  p.restart_window = 60s;
  return p;
}

} // namespace

TEST_CASE("the supervisor publishes its child in the slot") {
  fixture f{test_policy()};
  CHECK(f.slot->generation() == 1);
  CHECK(f.ping(41) == 42);
}

TEST_CASE("a failed child restarts after the backoff") {
  fixture f{test_policy()};
  CHECK(f.query().running);
  f.fail_child();
  CHECK_FALSE(f.query().running);
  CHECK(f.slot->generation() == 1); // not restarted yet
  f.advance(99ms);
  CHECK_FALSE(f.query().running);
  f.advance(1ms);
  auto s = f.query();
  CHECK(s.running);
  CHECK(s.restarts == 1);
  // The new incarnation is published in the same slot.
  CHECK(f.slot->generation() == 2);
  CHECK(f.ping(1) == 2);
}

TEST_CASE("the backoff doubles up to its cap") {
  fixture f{test_policy()};
  std::vector<caf::timespan> waits{100ms, 200ms, 400ms, 400ms};
  for (size_t i = 0; i < waits.size(); ++i) {
    f.fail_child();
    f.advance(waits[i] - 1ms);
    CHECK_FALSE(f.query().running);
    f.advance(1ms);
    auto s = f.query();
    CHECK(s.running);
    CHECK(s.restarts == i + 1);
  }
}

TEST_CASE("the backoff resets after the child stayed up") {
  fixture f{test_policy()};
  f.fail_child();
  f.advance(100ms);
  f.fail_child();
  f.advance(200ms);
  REQUIRE(f.query().running);
  CHECK(f.query().next_backoff == 400ms);
  f.advance(5s); // the stable period
  f.fail_child();
  f.advance(100ms);
  auto s = f.query();
  CHECK(s.running);
  CHECK(s.restarts == 3);
}

TEST_CASE("too many restarts within the window escalate") {
  auto p = test_policy();
  p.max_restarts = 2;
  p.restart_window = 10s;
  fixture f{p};
  (*f.self)->monitor(f.sup);
  f.fail_child();
  f.advance(100ms);
  f.fail_child();
  f.advance(200ms);
  REQUIRE(f.query().restarts == 2);
  f.fail_child(); // the third failure within 10 s
  caf::error reason;
  bool down = false;
  (*f.self)->receive(
    [&](caf::down_msg& dm) {
      down = true;
      reason = dm.reason;
    },
    caf::after(0s) >> [] {});
  CHECK(down);
  CHECK(reason == caf::make_error(caf::sec::runtime_error));
}

TEST_CASE("failures older than the window do not count") {
  auto p = test_policy();
  p.max_restarts = 2;
  p.restart_window = 1s;
  p.stable_period = 1h;
  fixture f{p};
  f.fail_child();
  f.advance(100ms);
  f.fail_child();
  f.advance(200ms);
  f.advance(2s);
  f.fail_child();
  f.advance(400ms);
  auto s = f.query();
  CHECK(s.running);
  CHECK(s.restarts == 3);
}

TEST_CASE("stats of an unknown child are an error") {
  fixture f{test_policy()};
  (*f.self)->send(f.sup, stats_atom::value, "nobody");
  f.sched->run();
  caf::error err;
  (*f.self)->receive([&](caf::error& e) { err = std::move(e); },
                     caf::after(0s) >> [] {});
  CHECK(err == outrider::make_error(outrider::errc::unknown_child));
}

TEST_CASE("an actor slot tells its listeners of every start, until "
          "forgotten") {
  actor_slot<caf::actor> slot;
  int told = 0;
  uint64_t seen_generation = 0;
  auto key = slot.on_set([&] {
    ++told;
    seen_generation = slot.generation(); // may read the slot
  });
  slot.set(caf::actor{});
  slot.set(caf::actor{});
  CHECK(told == 2);
  CHECK(seen_generation == 2);
  slot.forget(key);
  slot.set(caf::actor{});
  CHECK(told == 2);
  CHECK(slot.generation() == 3);
}
