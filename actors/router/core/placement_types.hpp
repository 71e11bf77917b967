#pragma once

// The value types placement trades in: the request it places, the decision
// it answers, the KV events and loads it is told, the views it shows.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "actors/router/core/flow_queue.hpp"
#include "cluster/kv/block_hash.hpp"
#include "cluster/kv/kv_event.hpp"
#include "cluster/worker_record.hpp"

namespace outrider::router {

/// A request to place.
struct route_request {
  std::vector<uint32_t> tokens;
  std::vector<std::string> exclude; // workers that already failed it
  /// Which workers qualify: prefill, decode, or none for every worker
  /// that decodes (aggregated or decode).
  std::optional<engine::worker_role> role;
  /// What besides its tokens keys its blocks on the engines: the LoRA
  /// adapter, the tenant's cache salt, media items.
  kv::prompt_identity identity;
  /// Where it waits when every worker is busy: its flow (the tenant's
  /// fairness id) and priority band (higher first).
  std::string flow;
  int band = 0;
  /// The conversation it belongs to (the session header), for session
  /// affinity; empty: none.
  std::string session;
  /// The endpoint picker's subset hint: only ranks whose HTTP endpoint
  /// (`ip:port`, or a bare `ip` for every rank on it) is listed qualify;
  /// none: every rank. An empty list leaves none.
  std::optional<std::vector<std::string>> http_subset;
  /// Only ranks a gateway can reach (their worker advertises an HTTP
  /// endpoint): the endpoint picker's requests.
  bool needs_http_endpoint = false;
};

/// Where it goes.
struct route_decision {
  bool ok = false;
  /// Every candidate is above the queue threshold: ask again later (with
  /// `best_overlap_blocks`, `prompt_blocks` and `block_size` filled in: what
  /// the queue weighs the request by).
  bool busy = false;
  /// Turned away by the dispatcher's queue (flow control), not placed.
  shed_reason shed = shed_reason::none;
  /// With session affinity and a session: `new` (not remembered, or its
  /// worker is gone), `kept` (back to its worker) or `moved` (soft: its
  /// worker cost more than the margin allows); empty otherwise.
  std::string session_outcome;
  /// No worker (of the role) is known at all.
  bool no_worker = false;
  std::string error;
  uint64_t key = 0;  // for `release`
  uint32_t slot = 0; // the chosen (worker, rank)
  std::string worker_id;
  std::string endpoint;        // the worker's relay
  std::string engine_endpoint; // its engine (direct dispatch)
  std::string protocol;        // the engine's: openengine, vllm or sglang
  engine::worker_role role = engine::worker_role::aggregated; // the worker's
  std::string bootstrap_endpoint; // a prefill worker's (SGLang), or empty
  std::string http_endpoint;      // the rank's OpenAI HTTP, or empty
  int rank = 0;
  uint32_t overlap_blocks = 0;
  uint32_t prompt_blocks = 0;
  uint32_t block_size = 0;
  /// The chosen rank's load before this request was booked.
  uint64_t queued_prefill_tokens = 0;
  uint64_t held_decode_blocks = 0;
  /// KV blocks in use on the chosen rank as its engine last reported, if
  /// that report is fresh (-1: none, e.g. vLLM).
  int64_t engine_used_kv_blocks = -1;
  /// Why this rank: how many were on offer (the live ranks, when the
  /// search was pruned), how many were scored, the overlap it had
  /// (predicted blocks included) against the best scored, the cost of
  /// both, and the queue of the rank with the best overlap (what
  /// outweighed it).
  uint32_t candidates = 0;
  uint32_t scored = 0;
  uint32_t chosen_overlap_blocks = 0;
  uint32_t best_overlap_blocks = 0;
  /// Blocks after the chosen rank's GPU run that it holds only in an
  /// offload tier (credited by tier weight; loaded back, not computed).
  uint32_t offloaded_blocks = 0;
  double cost = 0;
  double best_overlap_cost = 0;
  uint64_t best_overlap_prefill_tokens = 0;
  /// -1: mostly cached on the chosen rank, sent ahead of its engine's
  /// waiting queue (router_config::priority_overlap); else 0.
  int32_t priority = 0;
};

/// A batch of a worker rank's KV events from its sidecar.
struct worker_events {
  std::string worker_id;
  int rank = 0;
  bool reset = false; // forget the rank first (a new subscription)
  std::vector<kv::kv_event> events;
  /// When the publisher sent the batch (ns since the Unix epoch; 0: not
  /// said): the router's event lag is measured from it.
  uint64_t sent_unix_nanos = 0;
  /// When the router read it from its stream (0: not said): the part of
  /// the lag spent waiting for the router actor is measured from it.
  std::chrono::steady_clock::time_point received{};
};

/// The load a (worker, rank) carries, as the router booked it.
struct slot_load {
  std::string worker_id;
  int rank = 0;
  uint64_t prefill_tokens = 0;
  uint64_t decode_blocks = 0;
};

/// What a worker's engine reports of its KV cache, per rank (GetLoad).
struct engine_load {
  struct rank_load {
    int rank = 0;
    uint64_t used_kv_blocks = 0;
    uint64_t total_kv_blocks = 0;
  };
  std::string worker_id;
  std::vector<rank_load> ranks;
  /// How long the report is believed: the longer of this and the router's
  /// `engine_load_fresh` (the load poller asks a large fleet less often
  /// than once a second and says so here).
  std::chrono::milliseconds fresh_for{0};
};

/// A (worker, rank) as the status page shows it.
struct slot_view {
  uint32_t slot = 0;
  std::string worker_id;
  engine::worker_role role = engine::worker_role::aggregated;
  int rank = 0;
  uint64_t prefill_tokens = 0;
  uint64_t decode_blocks = 0;
  size_t blocks_held = 0;             // engine blocks in the index
  int64_t engine_used_kv_blocks = -1; // as the engine reports (-1: unknown)
  uint64_t engine_total_kv_blocks = 0;
};

} // namespace outrider::router
