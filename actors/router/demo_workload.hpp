#pragma once

#include <string>

#include "actors/router/dispatcher.hpp"

namespace outrider::router {

struct workload_config {
  int requests = 48;
  int concurrency = 4;
  int groups = 6;                // distinct shared prefixes
  uint32_t prefix_tokens = 1024; // per group (a system prompt)
  uint32_t unique_tokens = 96;   // per request
  uint32_t max_tokens = 24;
};

/// A built-in workload for `--role all --demo-requests N`: requests that
/// share a few long prefixes, sent through the dispatcher; returns a
/// printable summary (requests, KV hit rate against what an infinite cache
/// would allow, TTFT and latency percentiles, throughput).
std::string run_demo_workload(dispatcher& d, const workload_config& cfg);

} // namespace outrider::router
