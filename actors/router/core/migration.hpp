#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/router/core/placement.hpp"
#include "cluster/engine/vocabulary.hpp"

namespace outrider::router {

struct generate_params {
  std::vector<uint32_t> prompt;
  uint32_t max_tokens = 16;
  std::optional<double> temperature;
  std::string model;
  /// The LoRA adapter the request names (its `model`, when that is an
  /// adapter the workers serve), and the tenant's cache salt (vLLM's
  /// `cache_salt`): both key its KV on the engines and so its placement.
  std::string lora;
  std::string cache_salt;
  /// Media items of a chat prompt (images), in order, each with the token
  /// its placeholder begins at; the prompt is matched against the index
  /// only before the first (`prompt_identity::match_limit`).
  /// At most this many, each uuid at most this long (both frontends).
  static constexpr size_t max_media = 64;
  static constexpr size_t max_uuid_bytes = 256;
  struct media_item {
    std::string url;
    std::string uuid;
    uint64_t offset = 0;
    /// Tokens the engine expands the item to, where the client knows it
    /// (gRPC); 0 when not. With a uuid for every item and every length
    /// known, the whole prompt is matched, keyed by the items as engines
    /// key it (vLLM takes the uuid as the item's identifier).
    uint64_t length = 0;
  };
  std::vector<media_item> media;
  /// Router time spent before dispatch (tokenizing, rendering a chat),
  /// counted with placement in outrider_router_overhead_seconds.
  std::chrono::nanoseconds preprocess{0};
  /// The client's own deadline (a gRPC caller's), when it has one: no
  /// engine call outlives it, whatever --request-timeout allows.
  std::optional<std::chrono::system_clock::time_point> deadline;
  /// Flow control: the tenant's flow (fairness id) and priority band.
  std::string flow;
  int band = 0;
  /// Session affinity: the conversation (its session header), or empty.
  std::string session;
  /// The frontend's span of this request as W3C trace context: the
  /// dispatcher's spans hang under it, and each engine call carries it on
  /// (empty: the request is not traced and no client context came).
  std::string traceparent;
  std::string tracestate;
};

/// How a request ended, one vocabulary for both frontends: each maps it to
/// its own code (`http_status_of` here, the gRPC frontend to its status).
enum class outcome_kind {
  ok,
  no_worker,     ///< nothing to place it on (HTTP 503, gRPC UNAVAILABLE)
  cancelled,     ///< the client went away (499, CANCELLED)
  timed_out,     ///< past its deadline (504, DEADLINE_EXCEEDED)
  overloaded,    ///< the engine is out of capacity (503, RESOURCE_EXHAUSTED)
  refused,       ///< the engine refused the request (400, INVALID_ARGUMENT)
  failed,        ///< any other failure (502, INTERNAL)
  shutting_down, ///< the router is stopping (503, UNAVAILABLE)
  shed,          ///< turned away by flow control (429, RESOURCE_EXHAUSTED)
};

constexpr int http_status_of(outcome_kind k) {
  switch (k) {
  case outcome_kind::ok:
    return 200;
  case outcome_kind::cancelled:
    return 499;
  case outcome_kind::timed_out:
    return 504;
  case outcome_kind::refused:
    return 400;
  case outcome_kind::failed:
    return 502;
  case outcome_kind::shed:
    return 429;
  case outcome_kind::no_worker:
  case outcome_kind::overloaded:
  case outcome_kind::shutting_down:
    return 503;
  }
  return 500;
}

struct generate_outcome {
  bool ok = false;
  outcome_kind kind = outcome_kind::ok;
  int http_status() const { return http_status_of(kind); }
  std::string error;
  std::vector<uint32_t> tokens;
  engine::finish_reason finish = engine::finish_reason::length;
  shed_reason shed = shed_reason::none; // with outcome_kind::shed
  uint32_t prompt_tokens = 0;
  uint32_t cached_tokens = 0; // prefix blocks the chosen worker held
  int migrations = 0;
  std::string worker_id;
};

/// How one streamed attempt on a worker ended.
enum class attempt_end {
  finished,    ///< the engine finished the request
  cancelled,   ///< the client went away (`on_tokens` returned false)
  unavailable, ///< the stream broke (worker or engine gone): migratable
  invalid,     ///< the engine refused the request (a client error)
  overloaded,  ///< the engine is out of capacity: no migration (503)
  timed_out,   ///< the request ran past its deadline (--request-timeout)
  failed,      ///< any other error
};

/// How a gRPC status that ended an attempt counts (docs/wire.md, "SGLang's
/// gRPC"): `broke` (the transport, not the request) is migratable;
/// RESOURCE_EXHAUSTED is an overloaded engine; INVALID_ARGUMENT, NOT_FOUND,
/// FAILED_PRECONDITION and OUT_OF_RANGE are the request's fault;
/// DEADLINE_EXCEEDED a timeout.
attempt_end end_for_status(int grpc_code, bool broke);

struct attempt_result {
  attempt_end end = attempt_end::failed;
  std::string message; // why, when it did not finish
};

/// Gets each chunk of new tokens; returning false cancels the request.
using token_sink = std::function<bool(const std::vector<uint32_t>&)>;

/// What the migration loop needs from the world; the dispatcher implements
/// it with the router actor and engine streams, tests with a double. Every
/// step is asynchronous: it reports through its `done`, exactly once, on
/// any thread (the double may call it at once).
class attempt_seams {
 public:
  virtual ~attempt_seams() = default;
  /// Picks a worker for `req` (waiting while every worker is busy); may set
  /// the request's role.
  virtual void place(const std::shared_ptr<route_request>& req,
                     std::function<void(route_decision)> done) = 0;
  /// Streams `tokens` (the prompt plus what earlier attempts produced) on
  /// `d`'s worker for at most `max_tokens`; appends new tokens to
  /// `out.tokens` and hands each chunk to `on_tokens`, and records the
  /// finish reason and (on the first attempt) the cached prompt tokens.
  /// `out` and `on_tokens` live until `done`.
  virtual void stream(const route_decision& d,
                      const std::vector<uint32_t>& tokens, uint32_t max_tokens,
                      int attempt, generate_outcome& out,
                      const token_sink& on_tokens,
                      std::function<void(attempt_result)> done) = 0;
  /// The attempt is over: its load booking goes.
  virtual void release(const route_decision& d) = 0;
  /// A stream is being moved to another worker (metrics, log).
  virtual void migrating(const route_decision&, const generate_outcome&) {}
  /// False once migration must stop (the router is shutting down).
  virtual bool may_migrate() const { return true; }
};

/// Runs a request to its end, migrating a broken stream: the tokens so far
/// are appended to the prompt and the request continues on another worker
/// (the failed ones excluded), at most `migration_limit` times, so the
/// caller sees one contiguous stream. Outcomes: ok, 499 (cancelled), 503 (no
/// worker), 400 (refused), 504 (past its deadline), 502 (failed, or broken
/// past the limit). Returns
/// at once; `done` gets the outcome when the last step ended, on the thread
/// that ended it. `seams` is kept alive until then.
void run_with_migration(generate_params p, int migration_limit,
                        std::shared_ptr<attempt_seams> seams,
                        token_sink on_tokens,
                        std::function<void(generate_outcome)> done);

} // namespace outrider::router
