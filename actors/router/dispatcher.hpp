#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "actors/router/disagg_policy.hpp"
#include "actors/router/kv_router.hpp"
#include "actors/router/migration.hpp"
#include "actors/router/recent_window.hpp"
#include "runtime/actor_slot.hpp"
#include "runtime/metrics.hpp"
#include "runtime/worker_pool.hpp"

namespace grpc {
class Channel;
class ChannelCredentials;
class ClientContext;
} // namespace grpc

namespace outrider::router {

/// Sends requests where the router says, with no thread per request: the
/// router actor picks a rank (asked from a short-lived actor per placement,
/// which also waits out a router restart and queues while every worker is
/// busy), and `Generate` streams on gRPC's callback API from the worker's
/// relay (OpenEngine) or, with `--dispatch direct`, from its engine
/// (OpenEngine or vLLM); prefill and completion are reported back for load
/// tracking. A stream that breaks (UNAVAILABLE) is migrated: the tokens so
/// far are appended to the prompt and the request continues on another
/// worker, up to `migration_limit` times; the caller sees one contiguous
/// stream. With conditional disaggregation a request goes to a decode
/// worker, prefilled first on a prefill worker when the policy says so (the
/// KV session travels along).
class dispatcher {
 public:
  dispatcher(caf::actor_system& sys, runtime::slot_ptr<kv_router_actor> router,
             int migration_limit,
             std::optional<disagg_config> disagg = std::nullopt,
             std::optional<double> queue_threshold = std::nullopt,
             bool direct = false);
  /// Ends what is still in flight (see `cancel_all`).
  ~dispatcher();
  dispatcher(const dispatcher&) = delete;
  dispatcher& operator=(const dispatcher&) = delete;

  /// Starts a request and returns at once. `on_tokens` gets each chunk of
  /// new tokens, on gRPC's threads, one call at a time; returning false
  /// cancels (the engine request is aborted). `done` gets the outcome, once.
  void generate(generate_params p, token_sink on_tokens,
                std::function<void(generate_outcome)> done);
  /// The same, waiting for the outcome (the demo workload, tools).
  generate_outcome generate_blocking(const generate_params& p,
                                     token_sink on_tokens);

  /// Every engine call of a request ends by this long after the request
  /// began (504 beyond); set before the first request.
  void set_request_timeout(std::chrono::milliseconds t) {
    request_timeout_ = t;
  }
  /// How calls to the sidecars' relays are secured (--tls-*); engines are
  /// spoken to in plaintext. Set before the first request.
  void set_relay_credentials(std::shared_ptr<grpc::ChannelCredentials> c,
                             std::string tls_server_name = {}) {
    relay_creds_ = std::move(c);
    relay_server_name_ = std::move(tls_server_name);
  }

  /// From now on a broken stream is not migrated and nothing waits in the
  /// queue for a free worker (the router is shutting down).
  /// Stops queueing: every request waiting in line is answered now.
  void begin_shutdown();
  bool shutting_down() const { return shutting_down_.load(); }
  /// Ends every request in flight now: their engine calls are cancelled and
  /// they finish with 503 "the router is shutting down"; so does anything
  /// started later. Waits up to `wait` for them to have ended.
  void cancel_all(std::chrono::milliseconds wait);
  /// Requests started and not yet done.
  size_t in_flight() const { return active_.load(); }
  /// Requests finished over the last minute (the status page).
  const recent_window& recent() const { return recent_; }

 private:
  class attempts; // the migration loop's seams, one per request
  friend class attempts;
  struct place_job;
  using placed_fn = std::function<void(route_decision)>;
  using session_fn = std::function<void(std::optional<std::string>)>;

  // Metric handles, built once.
  struct stats {
    runtime::histogram* ttft = nullptr;
    runtime::histogram* itl = nullptr;
    runtime::histogram* overhead = nullptr;
    runtime::counter* migrations = nullptr;
    runtime::gauge* queue_depth = nullptr;
    runtime::gauge* in_flight = nullptr;
    runtime::counter* decode_load_engine = nullptr;
    runtime::counter* decode_load_books = nullptr;
    std::map<std::string, runtime::counter*> disagg_outcomes;
    runtime::counter& disagg(const std::string& outcome) {
      return *disagg_outcomes.at(outcome);
    }
    static stats make();
  };

  std::shared_ptr<attempt_seams> make_attempts(const generate_params& p);
  /// One channel per endpoint; `relay`: a sidecar's relay (with the relay
  /// credentials), else an engine.
  std::shared_ptr<grpc::Channel> channel_for(const std::string& endpoint,
                                             bool relay);
  /// Asks the router actor for a rank; with `queue`, waits (bounded) while
  /// every worker is busy.
  void place(std::shared_ptr<const route_request> req, bool queue,
             placed_fn done);
  void place_once(caf::event_based_actor* self,
                  const std::shared_ptr<place_job>& job);
  void placed(caf::event_based_actor* self,
              const std::shared_ptr<place_job>& job, uint64_t generation,
              route_decision d, bool down);
  /// The waiting line of the job's role; true when it is first.
  bool join_line(const std::shared_ptr<place_job>& job);
  void leave_line(const std::shared_ptr<place_job>& job);
  /// Asks again after `after`, unless a timer is set already.
  void retry_later(caf::event_based_actor* self,
                   const std::shared_ptr<place_job>& job,
                   std::chrono::milliseconds after);
  /// A booking shrank (the prompt is computed) or went (the request is
  /// done): tells the router actor and wakes the first of every line.
  void unbook(uint64_t key, bool finished);
  /// Conditional disaggregation: prefills remotely when the policy says so
  /// and hands the serialised KV session for the decode worker `d` to
  /// `done` (nullopt: the decode worker prefills itself).
  /// With an SGLang prefill worker (one with a bootstrap server) the
  /// session is a bootstrap room and `done` runs as soon as the prefill leg
  /// is sent: SGLang needs both legs at once.
  void maybe_remote_prefill(const std::vector<uint32_t>& tokens,
                            const kv::prompt_identity& identity,
                            const route_decision& d, session_fn done);
  bool local_prefill_wins(size_t prompt_tokens, const route_decision& d,
                          const route_decision& p);
  static int64_t new_bootstrap_room();
  /// Engine calls in flight, so `cancel_all` reaches them. `track` is
  /// false (and nothing is tracked) once everything was cancelled.
  bool track(grpc::ClientContext* ctx);
  void untrack(grpc::ClientContext* ctx);
  /// Runs a blocking chore (an abort on an engine) off gRPC's threads.
  void chore(std::function<void()> fn);

  caf::actor_system& sys_;
  runtime::slot_ptr<kv_router_actor> router_; // the current incarnation
  int migration_limit_;
  std::optional<disagg_config> disagg_;
  std::optional<double> queue_threshold_;
  bool direct_ = false; // --dispatch direct: straight to the engines
  std::shared_ptr<grpc::ChannelCredentials> relay_creds_;
  std::string relay_server_name_; // --tls-server-name
  std::chrono::milliseconds request_timeout_{std::chrono::minutes{30}};
  stats stats_ = stats::make();
  recent_window recent_;
  std::atomic<uint64_t> next_id_{0};
  std::atomic<bool> shutting_down_{false};
  std::atomic<bool> cut_{false};
  std::atomic<size_t> active_{0};
  // The router actor's generation that last placed a request.
  std::atomic<uint64_t> placed_generation_{0};
  std::mutex mtx_;
  std::map<std::string, std::shared_ptr<grpc::Channel>> channels_; // mtx_
  std::set<grpc::ClientContext*> calls_;                           // mtx_
  /// Requests waiting while every worker is busy, by role, first come
  /// first (mtx_).
  // One line per role asked for (none: any worker that decodes).
  std::map<std::optional<engine::worker_role>,
           std::deque<std::shared_ptr<place_job>>>
    lines_;
  std::unique_ptr<runtime::worker_pool> chores_;
};

} // namespace outrider::router
