#include "actors/router/dispatch/dispatch_queue.hpp"

#include <set>
#include <utility>

#include "runtime/ask.hpp"

namespace outrider::router {

namespace {

using clock_type = std::chrono::steady_clock;
using retry_atom = caf::atom_constant<caf::atom("retry")>;   // a timer's
using wake_atom = caf::atom_constant<caf::atom("wake")>;     // a load change
using expire_atom = caf::atom_constant<caf::atom("expire")>; // --queue-timeout
using evict_atom = caf::atom_constant<caf::atom("evict")>;   // pushed out

// Requests shed by flow control, by reason and flow; flows beyond the first
// 32 share the label "other" (a tenant per request cannot grow the
// metrics without bound).
runtime::counter& shed_counter(shed_reason why, const std::string& flow) {
  static std::mutex mtx;
  static std::set<std::string> named;
  std::string label = "other";
  {
    std::lock_guard<std::mutex> guard{mtx};
    if (named.count(flow) || named.size() < 32) {
      named.insert(flow);
      label = flow;
    }
  }
  return runtime::global_metrics().get_counter(
    "outrider_router_shed_total",
    "Requests turned away by flow control (HTTP 429), by reason and flow "
    "(the first 32 flows by name, the rest as other)",
    {{"reason", to_string(why)}, {"flow", label}});
}

} // namespace

// One placement: retried while the router actor restarts or no worker is
// known (up to 3 s: a router that just started, a worker set between a
// sidecar's restart and its registration) and, when `queue`, while every
// worker is busy (up to --queue-timeout, not once shutdown began).
struct dispatch_queue::job {
  uint64_t id = 0;
  std::shared_ptr<const route_request> req;
  bool queue = false;
  placed_fn done;
  clock_type::time_point restart_deadline =
    clock_type::now() + std::chrono::seconds{3};
  clock_type::time_point queue_deadline; // once queued
  bool queued = false;
  caf::actor self;      // its placing actor, woken when its turn comes
  bool asking = false;  // a request to the router actor is out (never two)
  bool polling = false; // a retry timer is set (never two)
  bool rewake = false;  // woken while asking: ask again at once if busy
  // Shed while a question was out (woken at shutdown while waiting): the
  // answer is waited for, and a placement it brings released.
  shed_reason shed_pending = shed_reason::none;
};

dispatch_queue::dispatch_queue(caf::actor_system& sys,
                               runtime::slot_ptr<kv_router_actor> router,
                               runtime::gauge& queue_depth, flow_config flow,
                               std::chrono::milliseconds queue_timeout)
  : sys_(sys), router_(std::move(router)), queue_depth_(queue_depth),
    flow_(flow), queue_timeout_ms_(queue_timeout.count()) {}

flow_config dispatch_queue::flow() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return flow_;
}

void dispatch_queue::retune(flow_config flow,
                            std::chrono::milliseconds queue_timeout) {
  queue_timeout_ms_ = queue_timeout.count();
  std::lock_guard<std::mutex> guard{mtx_};
  flow_ = flow;
  for (auto& [role, l] : lines_)
    l.waiting.retune(flow);
}

void dispatch_queue::place(std::shared_ptr<const route_request> req, bool queue,
                           placed_fn done) {
  auto j = std::make_shared<job>();
  j->id = ++next_job_;
  j->req = std::move(req);
  j->queue = queue;
  j->done = std::move(done);
  // Called from the frontends' threads and from gRPC's (a retry after a
  // relay failed), none of them the actor system's.
  runtime::spawn_anywhere(
    sys_, [this, j](caf::event_based_actor* self) -> caf::behavior {
      place_once(self, j);
      return {[this, self, j](retry_atom) {
                j->polling = false;
                place_once(self, j);
              },
              [this, self, j](wake_atom) { place_once(self, j); },
              [this, self, j](expire_atom) {
                // Still waiting behind others: its time is up. (The head
                // looks at its deadline itself after each answer.)
                if (leave_waiting(j))
                  shed_soon(self, j, shed_reason::ttl_expired);
              },
              [this, self, j](evict_atom) {
                // Out of the line already (a smaller flow took its place).
                shed_soon(self, j, shed_reason::saturated);
              }};
    });
}

void dispatch_queue::shed_soon(caf::event_based_actor* self,
                               const std::shared_ptr<job>& j, shed_reason why) {
  if (j->asking)
    j->shed_pending = why; // once the answer is in
  else
    shed(self, j, why);
}

void dispatch_queue::place_once(caf::event_based_actor* self,
                                const std::shared_ptr<job>& j) {
  if (j->asking) {
    j->rewake = true; // the answer may predate the change: ask again
    return;
  }
  j->asking = true;
  auto generation = router_->generation();
  // Urgent: the router actor takes it ahead of the KV batches waiting in its
  // mailbox (CAF serves urgent messages first, twice the quantum), so a
  // decision never waits behind a backlog of events; it sees the index as
  // applied so far. In front of a simulated fleet of 10,000 workers that
  // the router could not keep up with, requests waited 37-41 s for their
  // decision behind the backlog (docs/benchmarks.md, "A router in front of
  // a fleet").
  self
    ->request<caf::message_priority::high>(
      router_->get(), caf::duration{std::chrono::seconds{5}}, place_atom::value,
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
  if (j->shed_pending != shed_reason::none) {
    if (d.ok)
      unbook(d.key, true);
    return shed(self, j, j->shed_pending);
  }
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
  // line: only the head of the line asks again, woken when a booking
  // shrinks (unbook) and every 5 ms meanwhile; the others wait for their
  // turn, which flow control gives (priority band, then the flows' fair
  // share of prompt tokens).
  if (d.busy && j->queue && !shutting_down_.load()) {
    if (!j->queued) {
      j->queued = true;
      auto timeout = std::chrono::milliseconds{queue_timeout_ms_.load()};
      j->queue_deadline = now + timeout;
      j->self = caf::actor_cast<caf::actor>(self);
      queue_depth_.add(1);
      // Its weight: the prompt tokens the best worker would still compute.
      uint64_t tokens = j->req->tokens.size();
      uint64_t cached = uint64_t{d.best_overlap_blocks} * d.block_size;
      auto where = join_line(j, tokens - std::min(tokens, cached));
      if (where == joined::saturated) {
        j->queued = false;
        queue_depth_.add(-1);
        return shed(self, j, shed_reason::saturated);
      }
      self->delayed_send(self, timeout, expire_atom::value);
      if (where == joined::waiting)
        return; // woken when its turn comes
    }
    if (now >= j->queue_deadline)
      return shed(self, j, shed_reason::ttl_expired);
    if (std::exchange(j->rewake, false))
      place_once(self, j);
    else
      retry_later(self, j, std::chrono::milliseconds{5});
    return;
  }
  answer(self, j, std::move(d));
}

void dispatch_queue::answer(caf::event_based_actor* self,
                            const std::shared_ptr<job>& j, route_decision d) {
  if (j->queued) {
    queue_depth_.add(-1);
    leave_line(j);
  }
  self->quit();
  auto done = std::move(j->done);
  done(std::move(d));
}

void dispatch_queue::shed(caf::event_based_actor* self,
                          const std::shared_ptr<job>& j, shed_reason why) {
  shed_counter(why, j->req->flow).inc();
  size_t band_cap = 0;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    band_cap = flow_.band_cap;
  }
  route_decision d;
  d.shed = why;
  d.error = why == shed_reason::saturated
              ? "too many requests are waiting in priority band " +
                  std::to_string(j->req->band) + " (--flow-band-cap " +
                  std::to_string(band_cap) + ")"
              : "no worker could take the request within --queue-timeout (" +
                  std::to_string(queue_timeout_ms_.load()) + " ms)";
  answer(self, j, std::move(d));
}

void dispatch_queue::begin_shutdown() {
  shutting_down_ = true;
  std::vector<caf::actor> waiting;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    for (const auto& [role, l] : lines_) {
      if (l.head)
        waiting.push_back(l.head->self);
      for (const auto& [id, waiting_job] : l.jobs)
        waiting.push_back(waiting_job->self);
    }
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
    for (const auto& [role, l] : lines_)
      if (l.head)
        heads.push_back(l.head->self);
  }
  for (const auto& a : heads)
    caf::anon_send(a, wake_atom::value);
}

dispatch_queue::joined dispatch_queue::join_line(const std::shared_ptr<job>& j,
                                                 uint64_t cost) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto& l =
    lines_.try_emplace(j->req->role, line{flow_queue{flow_}}).first->second;
  // No head means nobody waits either: a head leaving hands over at once.
  if (!l.head) {
    l.head = j;
    return joined::head;
  }
  auto pushed = l.waiting.push(j->id, j->req->flow, j->req->band, cost);
  if (!pushed.queued)
    return joined::saturated;
  if (pushed.evicted) {
    // Pushed out to make room for a smaller flow: shed (saturated).
    auto it = l.jobs.find(*pushed.evicted);
    caf::anon_send(it->second->self, evict_atom::value);
    l.jobs.erase(it);
  }
  l.jobs[j->id] = j;
  return joined::waiting;
}

// Out of its line; when it was the head, flow control names the next one,
// who asks at once.
void dispatch_queue::leave_line(const std::shared_ptr<job>& j) {
  caf::actor next;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    auto found = lines_.find(j->req->role);
    if (found == lines_.end())
      return;
    auto& l = found->second;
    if (l.head == j) {
      l.head.reset();
      if (auto id = l.waiting.pop()) {
        auto it = l.jobs.find(*id);
        l.head = it->second;
        l.jobs.erase(it);
        next = l.head->self;
      }
    } else if (l.waiting.remove(j->id)) {
      l.jobs.erase(j->id);
    }
  }
  if (next)
    caf::anon_send(next, wake_atom::value);
}

bool dispatch_queue::leave_waiting(const std::shared_ptr<job>& j) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto found = lines_.find(j->req->role);
  if (found == lines_.end() || !found->second.waiting.remove(j->id))
    return false;
  auto& l = found->second;
  l.jobs.erase(j->id);
  return true;
}

} // namespace outrider::router
