#include "actors/router/dispatch/dispatch_queue.hpp"

#include <utility>

namespace outrider::router {

namespace {

using clock_type = std::chrono::steady_clock;
using retry_atom = caf::atom_constant<caf::atom("retry")>; // a timer's
using wake_atom = caf::atom_constant<caf::atom("wake")>;   // a load change

} // namespace

// One placement: retried while the router actor restarts or no worker is
// known (up to 3 s: a router that just started, a worker set between a
// sidecar's restart and its registration) and, when `queue`, while every
// worker is busy (up to 5 min, not once shutdown began).
struct dispatch_queue::job {
  std::shared_ptr<const route_request> req;
  bool queue = false;
  placed_fn done;
  clock_type::time_point restart_deadline =
    clock_type::now() + std::chrono::seconds{3};
  clock_type::time_point queue_deadline =
    clock_type::now() + std::chrono::minutes{5};
  bool queued = false;
  caf::actor self;      // its placing actor, woken when its turn comes
  bool asking = false;  // a request to the router actor is out (never two)
  bool polling = false; // a retry timer is set (never two)
  bool rewake = false;  // woken while asking: ask again at once if busy
};

dispatch_queue::dispatch_queue(caf::actor_system& sys,
                               runtime::slot_ptr<kv_router_actor> router,
                               runtime::gauge& queue_depth)
  : sys_(sys), router_(std::move(router)), queue_depth_(queue_depth) {}

void dispatch_queue::place(std::shared_ptr<const route_request> req, bool queue,
                           placed_fn done) {
  auto j = std::make_shared<job>();
  j->req = std::move(req);
  j->queue = queue;
  j->done = std::move(done);
  sys_.spawn([this, j](caf::event_based_actor* self) -> caf::behavior {
    place_once(self, j);
    return {[this, self, j](retry_atom) {
              j->polling = false;
              place_once(self, j);
            },
            [this, self, j](wake_atom) { place_once(self, j); }};
  });
}

void dispatch_queue::place_once(caf::event_based_actor* self,
                                const std::shared_ptr<job>& j) {
  if (j->asking) {
    j->rewake = true; // the answer may predate the change: ask again
    return;
  }
  j->asking = true;
  auto generation = router_->generation();
  self
    ->request(router_->get(), std::chrono::seconds{5}, place_atom::value,
              j->req)
    .then(
      [this, self, j, generation](route_decision& d) {
        j->asking = false;
        placed(self, j, generation, std::move(d), false);
      },
      [this, self, j, generation](caf::error& e) {
        j->asking = false;
        route_decision d;
        d.error = sys_.render(e);
        placed(self, j, generation, std::move(d), true);
      });
}

void dispatch_queue::placed(caf::event_based_actor* self,
                            const std::shared_ptr<job>& j, uint64_t generation,
                            route_decision d, bool down) {
  if (d.ok)
    placed_generation_ = generation;
  // While the supervisor restarts the router actor (it does not answer, or
  // it does not know the workers yet), or while no worker is known at all,
  // wait a little rather than fail.
  auto settled = placed_generation_.load();
  bool restarting =
    down || (!d.ok && !d.busy &&
             (d.no_worker || (settled != 0 && settled != generation)));
  auto now = clock_type::now();
  if (restarting && now < j->restart_deadline && !cut_.load()) {
    retry_later(self, j, std::chrono::milliseconds{20});
    return;
  }
  // Every worker is busy: wait here rather than pile on (bounded), in
  // line: only the first of the line asks again, woken when a booking
  // shrinks (unbook) and every 5 ms meanwhile; the others wait for
  // their turn, so requests leave in the order they came.
  if (d.busy && j->queue && !shutting_down_.load() && now < j->queue_deadline) {
    if (!j->queued) {
      j->queued = true;
      j->self = caf::actor_cast<caf::actor>(self);
      queue_depth_.add(1);
      if (!join_line(j))
        return; // woken by the one before it
    }
    if (std::exchange(j->rewake, false))
      place_once(self, j);
    else
      retry_later(self, j, std::chrono::milliseconds{5});
    return;
  }
  if (j->queued) {
    queue_depth_.add(-1);
    leave_line(j);
  }
  self->quit();
  auto done = std::move(j->done);
  done(std::move(d));
}

void dispatch_queue::begin_shutdown() {
  shutting_down_ = true;
  std::vector<caf::actor> waiting;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    for (const auto& [role, line] : lines_)
      for (const auto& waiting_job : line)
        waiting.push_back(waiting_job->self);
  }
  for (const auto& a : waiting)
    caf::anon_send(a, wake_atom::value);
}

void dispatch_queue::retry_later(caf::event_based_actor* self,
                                 const std::shared_ptr<job>& j,
                                 std::chrono::milliseconds after) {
  if (j->polling)
    return;
  j->polling = true;
  self->delayed_send(self, after, retry_atom::value);
}

// Sent before the wake-up, so the router actor has the booking's change in
// its mailbox ahead of the first of the line's question.
void dispatch_queue::unbook(uint64_t key, bool finished) {
  if (finished)
    caf::anon_send(router_->get(), release_atom::value, key);
  else
    caf::anon_send(router_->get(), prefilled_atom::value, key);
  std::vector<caf::actor> heads;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    for (const auto& [role, line] : lines_)
      if (!line.empty())
        heads.push_back(line.front()->self);
  }
  for (const auto& a : heads)
    caf::anon_send(a, wake_atom::value);
}

bool dispatch_queue::join_line(const std::shared_ptr<job>& j) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto& line = lines_[j->req->role];
  line.push_back(j);
  return line.size() == 1;
}

// The first of the line is done: the next one's turn (at once).
void dispatch_queue::leave_line(const std::shared_ptr<job>& j) {
  caf::actor next;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    auto& line = lines_[j->req->role];
    bool first = !line.empty() && line.front() == j;
    std::erase(line, j);
    if (first && !line.empty())
      next = line.front()->self;
  }
  if (next)
    caf::anon_send(next, wake_atom::value);
}

} // namespace outrider::router
