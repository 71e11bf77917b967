#pragma once

#include <string>

#include "actors/router/dispatch/dispatcher.hpp"

namespace outrider::router {

/// The built-in demo workload (`--role all --demo-requests N`): multi-turn
/// conversations that share a few long system prompts. Each turn's prompt is
/// the conversation so far (its system prompt, earlier user turns and the
/// engine's own answers) plus a new user turn, so a worker that served the
/// previous turn holds all but the new part; conversations run at once and
/// start a little apart, so that caches and queues are contested.
struct workload_config {
  int requests = 48;             // turns in all
  int conversations = 128;       // at most; fewer when requests are few
  int system_prompts = 4;        // distinct shared system prompts
  uint32_t system_tokens = 2048; // per system prompt
  uint32_t user_tokens = 512;    // per user turn
  uint32_t max_tokens = 16;      // per answer
  int stagger_ms = 10;           // between conversation starts
  std::string label;             // progress lines: "[label] ..."
};

/// Runs it through the dispatcher, printing progress to stderr every two
/// seconds; returns a printable summary (requests, KV hit rate against what
/// an infinite cache would allow, TTFT and latency percentiles, throughput)
/// ending in one `demo-result: {json}` line for scripts to compare modes.
std::string run_demo_workload(dispatcher& d, const workload_config& cfg);

} // namespace outrider::router
