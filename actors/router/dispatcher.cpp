// The dispatcher's frame: placement through the router actor (one
// short-lived actor per placement, so nothing blocks while the router
// answers, restarts or every worker is busy), the registry of engine calls
// in flight, shutdown. The attempts themselves are in dispatch_attempts.cpp.
#include "actors/router/dispatcher.hpp"

#include <future>
#include <thread>
#include <utility>

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include "cluster/tls.hpp"

namespace outrider::router {

namespace {

using clock_type = std::chrono::steady_clock;
using retry_atom = caf::atom_constant<caf::atom("retry")>; // a timer's
using wake_atom = caf::atom_constant<caf::atom("wake")>;   // a load change

const std::string shutdown_message = "the router is shutting down";

} // namespace

// One placement: retried while the router actor restarts or no worker is
// known (up to 3 s: a router that just started, a worker set between a
// sidecar's restart and its registration) and, when `queue`, while every
// worker is busy (up to 5 min, not once shutdown began).
struct dispatcher::place_job {
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

dispatcher::stats dispatcher::stats::make() {
  auto& m = runtime::global_metrics();
  stats s;
  s.ttft =
    &m.get_histogram("outrider_router_ttft_seconds", "Time to the first token",
                     runtime::metrics_registry::latency_bounds());
  s.itl = &m.get_histogram("outrider_router_inter_token_seconds",
                           "Time between streamed tokens",
                           runtime::metrics_registry::latency_bounds());
  s.overhead = &m.get_histogram(
    "outrider_router_overhead_seconds",
    "Router time per request: tokenizing, hashing, index lookup, selection",
    {0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.005, 0.01,
     0.025, 0.05, 0.1});
  s.migrations = &m.get_counter("outrider_router_migrations_total",
                                "Streams moved to another worker");
  s.queue_depth =
    &m.get_gauge("outrider_router_queue_depth",
                 "Requests waiting for a worker below the queue threshold");
  s.in_flight = &m.get_gauge("outrider_router_requests_in_flight",
                             "Requests the dispatcher is carrying");
  const char* source_help =
    "Disaggregation decisions by where the decode worker's KV load came "
    "from: its engine's report (GetLoad) or the router's books";
  s.decode_load_engine =
    &m.get_counter("outrider_router_disagg_decode_load_total", source_help,
                   {{"source", "engine"}});
  s.decode_load_books =
    &m.get_counter("outrider_router_disagg_decode_load_total", source_help,
                   {{"source", "books"}});
  for (const char* outcome :
       {"no_prefill_pool", "local_prefill", "prefill_failed", "remote_prefill",
        "incompatible_prefill"})
    s.disagg_outcomes[outcome] =
      &m.get_counter("outrider_router_disagg_decisions_total",
                     "Conditional disaggregation decisions, by outcome",
                     {{"outcome", outcome}});
  return s;
}

dispatcher::dispatcher(caf::actor_system& sys,
                       runtime::slot_ptr<kv_router_actor> router,
                       int migration_limit, std::optional<disagg_config> disagg,
                       std::optional<double> queue_threshold, bool direct)
  : sys_(sys), router_(std::move(router)), migration_limit_(migration_limit),
    disagg_(std::move(disagg)), queue_threshold_(queue_threshold),
    direct_(direct), chores_(std::make_unique<runtime::worker_pool>(2, 4096)) {}

dispatcher::~dispatcher() {
  begin_shutdown();
  cancel_all(std::chrono::seconds{3});
  chores_->stop();
}

void dispatcher::place(std::shared_ptr<const route_request> req, bool queue,
                       placed_fn done) {
  auto job = std::make_shared<place_job>();
  job->req = std::move(req);
  job->queue = queue;
  job->done = std::move(done);
  sys_.spawn([this, job](caf::event_based_actor* self) -> caf::behavior {
    place_once(self, job);
    return {[this, self, job](retry_atom) {
              job->polling = false;
              place_once(self, job);
            },
            [this, self, job](wake_atom) { place_once(self, job); }};
  });
}

void dispatcher::place_once(caf::event_based_actor* self,
                            const std::shared_ptr<place_job>& job) {
  if (job->asking) {
    job->rewake = true; // the answer may predate the change: ask again
    return;
  }
  job->asking = true;
  auto generation = router_->generation();
  self
    ->request(router_->get(), std::chrono::seconds{5}, place_atom::value,
              job->req)
    .then(
      [this, self, job, generation](route_decision& d) {
        job->asking = false;
        placed(self, job, generation, std::move(d), false);
      },
      [this, self, job, generation](caf::error& e) {
        job->asking = false;
        route_decision d;
        d.error = sys_.render(e);
        placed(self, job, generation, std::move(d), true);
      });
}

void dispatcher::placed(caf::event_based_actor* self,
                        const std::shared_ptr<place_job>& job,
                        uint64_t generation, route_decision d, bool down) {
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
  if (restarting && now < job->restart_deadline && !cut_.load()) {
    retry_later(self, job, std::chrono::milliseconds{20});
    return;
  }
  // Every worker is busy: wait here rather than pile on (bounded), in
  // line: only the first of the line asks again, woken when a booking
  // shrinks (unbook) and every 5 ms meanwhile; the others wait for
  // their turn, so requests leave in the order they came.
  if (d.busy && job->queue && !shutting_down_.load() &&
      now < job->queue_deadline) {
    if (!job->queued) {
      job->queued = true;
      job->self = caf::actor_cast<caf::actor>(self);
      stats_.queue_depth->add(1);
      if (!join_line(job))
        return; // woken by the one before it
    }
    if (std::exchange(job->rewake, false))
      place_once(self, job);
    else
      retry_later(self, job, std::chrono::milliseconds{5});
    return;
  }
  if (job->queued) {
    stats_.queue_depth->add(-1);
    leave_line(job);
  }
  self->quit();
  auto done = std::move(job->done);
  done(std::move(d));
}

void dispatcher::begin_shutdown() {
  shutting_down_ = true;
  std::vector<caf::actor> waiting;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    for (const auto& [role, line] : lines_)
      for (const auto& job : line)
        waiting.push_back(job->self);
  }
  for (const auto& a : waiting)
    caf::anon_send(a, wake_atom::value);
}

void dispatcher::retry_later(caf::event_based_actor* self,
                             const std::shared_ptr<place_job>& job,
                             std::chrono::milliseconds after) {
  if (job->polling)
    return;
  job->polling = true;
  self->delayed_send(self, after, retry_atom::value);
}

// Sent before the wake-up, so the router actor has the booking's change in
// its mailbox ahead of the first of the line's question.
void dispatcher::unbook(uint64_t key, bool finished) {
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

bool dispatcher::join_line(const std::shared_ptr<place_job>& job) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto& line = lines_[job->req->role];
  line.push_back(job);
  return line.size() == 1;
}

// The first of the line is done: the next one's turn (at once).
void dispatcher::leave_line(const std::shared_ptr<place_job>& job) {
  caf::actor next;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    auto& line = lines_[job->req->role];
    bool first = !line.empty() && line.front() == job;
    std::erase(line, job);
    if (first && !line.empty())
      next = line.front()->self;
  }
  if (next)
    caf::anon_send(next, wake_atom::value);
}

std::shared_ptr<grpc::Channel>
dispatcher::channel_for(const std::string& endpoint, bool relay) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto& ch = channels_[endpoint];
  if (!ch)
    ch = relay && relay_creds_
           ? cluster::relay_channel(endpoint, relay_creds_, relay_server_name_)
           : grpc::CreateChannel(endpoint, grpc::InsecureChannelCredentials());
  return ch;
}

bool dispatcher::track(grpc::ClientContext* ctx) {
  std::lock_guard<std::mutex> guard{mtx_};
  if (cut_.load())
    return false;
  calls_.insert(ctx);
  return true;
}

void dispatcher::untrack(grpc::ClientContext* ctx) {
  std::lock_guard<std::mutex> guard{mtx_};
  calls_.erase(ctx);
}

void dispatcher::chore(std::function<void()> fn) {
  if (!chores_->try_run(std::move(fn)))
    spdlog::warn("router: too many engine aborts pending; one was dropped");
}

void dispatcher::generate(generate_params p, token_sink on_tokens,
                          std::function<void(generate_outcome)> done) {
  ++active_;
  stats_.in_flight->add(1);
  auto finish = [this, done = std::move(done)](generate_outcome o) {
    if (!o.ok && cut_.load()) {
      o.http_status = 503;
      o.error = shutdown_message;
    }
    done(std::move(o));
    stats_.in_flight->add(-1);
    --active_;
  };
  if (cut_.load()) {
    generate_outcome o;
    return finish(std::move(o));
  }
  auto seams = make_attempts(p);
  run_with_migration(std::move(p), migration_limit_, std::move(seams),
                     std::move(on_tokens), std::move(finish));
}

generate_outcome dispatcher::generate_blocking(const generate_params& p,
                                               token_sink on_tokens) {
  std::promise<generate_outcome> result;
  auto outcome = result.get_future();
  generate(p, std::move(on_tokens),
           [&result](generate_outcome o) { result.set_value(std::move(o)); });
  return outcome.get();
}

void dispatcher::cancel_all(std::chrono::milliseconds wait) {
  shutting_down_ = true;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    cut_ = true;
    for (auto* ctx : calls_)
      ctx->TryCancel();
  }
  auto deadline = clock_type::now() + wait;
  while (active_.load() > 0 && clock_type::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds{5});
  if (auto left = active_.load(); left > 0)
    spdlog::warn("router: {} request(s) did not end in time", left);
}

} // namespace outrider::router
