#include "runtime/ask.hpp"

#include <future>
#include <memory>
#include <thread>

#include <caf/scheduler/test_coordinator.hpp>
#include <catch2/catch.hpp>

using namespace outrider::runtime;
using namespace std::chrono_literals;

namespace {

// CAF's test scheduler: no CAF thread, whose uninstrumented hand-offs and
// shutdown ThreadSanitizer would report against us; actors run only when
// a test runs them.
struct testing_config : caf::actor_system_config {
  testing_config() {
    set("scheduler.policy", caf::atom("testing"));
    set("logger.verbosity", caf::atom("quiet"));
  }
};

// Spawns an actor from a thread the actor system does not own, keeps that
// thread alive while the system is destroyed, and says whether the
// destruction finished within `limit` (it waits for every thread that
// still holds the system's logger). A watchdog lets the thread go at the
// limit either way, so a failure does not hang the test. The system is
// made and destroyed on this thread, as the process does.
template <class Spawn>
bool system_goes_beside_a_live_thread(Spawn spawn,
                                      std::chrono::milliseconds limit) {
  testing_config cfg;
  auto sys = std::make_unique<caf::actor_system>(cfg);
  std::promise<void> spawned;
  std::promise<void> release;
  std::promise<void> gone;
  auto released = release.get_future();
  std::thread outlives([&] {
    spawn(*sys);
    spawned.set_value();
    released.wait();
  });
  spawned.get_future().wait();
  bool in_time = false;
  std::thread watchdog([&, done = gone.get_future()] {
    in_time = done.wait_for(limit) == std::future_status::ready;
    release.set_value();
  });
  sys.reset();
  gone.set_value();
  watchdog.join();
  outlives.join();
  return in_time;
}

caf::behavior quits_at_once(caf::event_based_actor* self) {
  self->quit();
  return {};
}

} // namespace

TEST_CASE("spawn_anywhere leaves a foreign thread no hold on the actor system",
          "[runtime]") {
  // Before, a gRPC thread that placed a request hung `outrider --role all`
  // on exit: the actor system's destructor waited for that thread, which
  // gRPC keeps for the process's life.
  CHECK(system_goes_beside_a_live_thread(
    [](caf::actor_system& sys) {
      // Hidden: it never runs (nothing runs the test scheduler), and the
      // system does not wait for it; the hold comes from the spawn itself.
      spawn_anywhere<caf::lazy_init + caf::hidden>(sys, quits_at_once);
      CHECK(caf::logger::current_logger() == nullptr);
    },
    10s));
}

TEST_CASE("spawn_anywhere leaves a thread that held the actor system its "
          "hold (the system's own threads)",
          "[runtime]") {
  testing_config cfg;
  caf::actor_system sys{cfg};
  auto& sched =
    dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler());
  bool kept = false;
  sys.spawn([&kept](caf::event_based_actor* self) {
    auto* before = caf::logger::current_logger();
    spawn_anywhere(self->system(), quits_at_once);
    kept = before != nullptr && caf::logger::current_logger() == before;
    self->quit();
  });
  sched.run();
  CHECK(kept);
}
