#pragma once

// What every endpoint picker stream shares (internal to frontend/epp_*).

#include <atomic>

#include "actors/router/frontend/epp_server.hpp"
#include "runtime/metrics.hpp"
#include "runtime/worker_pool.hpp"

namespace outrider::router {

struct epp_server::state {
  dispatch_queue& queue;
  std::function<std::vector<std::string>()> models;
  epp_config cfg;
  runtime::worker_pool pool; // parses and tokenizes, off gRPC's threads
  std::atomic<size_t> streams{0};
  std::atomic<bool> stopping{false};
  runtime::histogram* decision = &runtime::global_metrics().get_histogram(
    "outrider_epp_decision_seconds",
    "Endpoint picker: from the request's body received to its endpoint "
    "answered (parse, tokenize, queue, place)",
    {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.25,
     1, 10});
  runtime::counter* served_elsewhere = &runtime::global_metrics().get_counter(
    "outrider_epp_served_elsewhere_total",
    "Responses the gateway says came from another endpoint than the one "
    "picked (a fallback or a retry)");
  runtime::counter& outcome(const std::string& what) {
    return runtime::global_metrics().get_counter(
      "outrider_epp_requests_total",
      "Endpoint picker requests by outcome: picked, no_endpoint, shed, "
      "bad_request, refused (too many streams)",
      {{"outcome", what}});
  }

  state(dispatch_queue& q, std::function<std::vector<std::string>()> m,
        epp_config c)
    : queue(q), models(std::move(m)), cfg(std::move(c)),
      pool(std::max<size_t>(1, cfg.tokenizer_threads), 4096) {}
};

} // namespace outrider::router
