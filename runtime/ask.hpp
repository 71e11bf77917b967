#pragma once

#include <chrono>
#include <utility>

#include <caf/all.hpp>

namespace outrider::runtime {

/// Spawns from any thread, including ones the actor system does not own (a
/// gRPC callback's, an HTTP server's). CAF 0.17's spawn leaves the calling
/// thread a reference to the system's logger, and the system's destructor
/// waits until every such reference is gone: a thread that outlives the
/// system (gRPC's pooled threads, the status server's) would hang the
/// process on exit. A thread that held none before gives it back; the
/// system's own threads keep theirs.
template <caf::spawn_options Os = caf::no_spawn_options, class... Ts>
auto spawn_anywhere(caf::actor_system& sys, Ts&&... xs) {
  const bool foreign = caf::logger::current_logger() == nullptr;
  auto hdl = sys.spawn<Os>(std::forward<Ts>(xs)...);
  if (foreign)
    caf::logger::set_current_actor_system(nullptr);
  return hdl;
}

/// Asks `whom` once (its answer a `Result`) without blocking the caller: a
/// short-lived actor sends the request and hands the answer to `reply`, or the
/// error (a timeout, a dead actor) to `fail`, on one of the actor system's
/// threads; then it goes. For callers that must not wait, such as the status
/// server's I/O thread.
template <class Result, class Handle, class Reply, class Fail, class... Ts>
void ask_async(caf::actor_system& sys, Handle whom,
               std::chrono::milliseconds timeout, Reply reply, Fail fail,
               Ts... msg) {
  spawn_anywhere(sys, [=](caf::event_based_actor* self) {
    self->request(whom, timeout, msg...)
      .then([reply](const Result& x) { reply(x); },
            [fail](caf::error& e) { fail(e); });
  });
}

} // namespace outrider::runtime
