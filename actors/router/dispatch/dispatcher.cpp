// The dispatcher's frame: it owns its parts (dispatch_queue, engine_calls,
// prefill_leg) and runs every request through the migration loop with the
// attempts of dispatch_attempts.cpp; shutdown.
#include "actors/router/dispatch/dispatcher.hpp"

#include <future>
#include <thread>
#include <utility>

#include <spdlog/spdlog.h>

namespace outrider::router {

namespace {

using clock_type = std::chrono::steady_clock;

const std::string shutdown_message = "the router is shutting down";

} // namespace

dispatch_stats dispatch_stats::make() {
  auto& m = runtime::global_metrics();
  dispatch_stats s;
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
                       dispatch_config cfg)
  : cfg_(std::move(cfg)), calls_(cfg_),
    queue_(sys, std::move(router), *stats_.queue_depth, cfg_.flow,
           cfg_.queue_timeout),
    prefill_(cfg_, queue_, calls_, stats_), parts_{cfg_,     stats_,
                                                   queue_,   calls_,
                                                   prefill_, recent_,
                                                   next_id_, shutting_down_} {}

dispatcher::~dispatcher() {
  begin_shutdown();
  cancel_all(std::chrono::seconds{3});
}

void dispatcher::begin_shutdown() {
  shutting_down_ = true;
  queue_.begin_shutdown();
}

void dispatcher::generate(generate_params p, token_sink on_tokens,
                          std::function<void(generate_outcome)> done) {
  ++active_;
  stats_.in_flight->add(1);
  auto finish = [this, done = std::move(done)](generate_outcome o) {
    if (!o.ok && calls_.cut()) {
      o.kind = outcome_kind::shutting_down;
      o.error = shutdown_message;
    }
    done(std::move(o));
    stats_.in_flight->add(-1);
    --active_;
  };
  if (calls_.cut()) {
    generate_outcome o;
    return finish(std::move(o));
  }
  auto seams = make_attempts(parts_, p);
  run_with_migration(std::move(p), cfg_.migration_limit, std::move(seams),
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
  queue_.cut();
  calls_.cancel_all();
  auto deadline = clock_type::now() + wait;
  while (active_.load() > 0 && clock_type::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds{5});
  if (auto left = active_.load(); left > 0)
    spdlog::warn("router: {} request(s) did not end in time", left);
}

} // namespace outrider::router
