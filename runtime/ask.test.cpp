#include "runtime/ask.hpp"

#include <future>
#include <memory>
#include <thread>

#include <catch2/catch.hpp>

using namespace outrider::runtime;
using namespace std::chrono_literals;

namespace {

// Spawns one short-lived actor from a thread the actor system does not own,
// keeps that thread alive while the system is destroyed, and says whether
// the destruction finished within `limit` (it waits for every thread that
// still holds the system's logger). The thread is let go either way, so a
// failure does not hang the test.
template <class Spawn>
bool system_goes_beside_a_live_thread(Spawn spawn,
                                      std::chrono::milliseconds limit) {
  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", size_t{1});
  auto sys = std::make_unique<caf::actor_system>(cfg);
  // The system is destroyed on another thread (to bound the wait), so the
  // thread that made it gives its own hold back by hand.
  caf::logger::set_current_actor_system(nullptr);
  std::promise<void> spawned;
  std::promise<void> release;
  auto released = release.get_future();
  std::thread outlives([&] {
    spawn(*sys);
    spawned.set_value();
    released.wait();
  });
  spawned.get_future().wait();
  auto gone = std::async(std::launch::async, [&] { sys.reset(); });
  const bool in_time = gone.wait_for(limit) == std::future_status::ready;
  release.set_value();
  outlives.join();
  gone.wait();
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
      spawn_anywhere(sys, quits_at_once);
      CHECK(caf::logger::current_logger() == nullptr);
    },
    10s));
}

TEST_CASE("spawn_anywhere leaves the actor system's own threads their logger",
          "[runtime]") {
  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", size_t{1});
  caf::actor_system sys{cfg};
  std::promise<bool> kept;
  auto answer = kept.get_future();
  sys.spawn([&kept](caf::event_based_actor* self) {
    auto* before = caf::logger::current_logger();
    spawn_anywhere(self->system(), quits_at_once);
    kept.set_value(before != nullptr &&
                   caf::logger::current_logger() == before);
    self->quit();
  });
  REQUIRE(answer.wait_for(10s) == std::future_status::ready);
  CHECK(answer.get());
}
