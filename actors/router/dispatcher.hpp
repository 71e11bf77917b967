#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "actors/router/disagg_policy.hpp"
#include "actors/router/kv_router.hpp"
#include "actors/router/migration.hpp"
#include "runtime/actor_slot.hpp"
#include "runtime/metrics.hpp"

namespace grpc {
class Channel;
}

namespace outrider::router {

/// Sends requests where the router says, straight from the caller's thread
/// (the hot path stays off actor mailboxes): asks the router actor for a
/// rank, streams `Generate` from the worker's relay (OpenEngine) or, with
/// `--dispatch direct`, from its engine (OpenEngine or vLLM), reports
/// prefill and completion back for load tracking. A stream that breaks
/// (UNAVAILABLE) is migrated: the tokens so far are appended to the prompt
/// and the request continues on another worker, up to `migration_limit`
/// times; the caller sees one contiguous stream. With conditional
/// disaggregation a request goes to a decode worker, prefilled first on a
/// prefill worker when the policy says so (the KV session travels along).
class dispatcher {
 public:
  dispatcher(caf::actor_system& sys, runtime::slot_ptr<kv_router_actor> router,
             int migration_limit,
             std::optional<disagg_config> disagg = std::nullopt,
             std::optional<double> queue_threshold = std::nullopt,
             bool direct = false);

  /// `on_tokens` gets each chunk of new tokens; returning false cancels
  /// (the engine request is aborted by the relay). Blocks until done.
  generate_outcome
  generate(const generate_params& p,
           const std::function<bool(const std::vector<uint32_t>&)>& on_tokens);

  /// From now on a broken stream is not migrated and nothing waits in the
  /// queue for a free worker (the router is shutting down).
  void begin_shutdown() { shutting_down_ = true; }

  struct kv_session_ref; // an OpenEngine KvSessionRef

 private:
  class attempts; // the migration loop's seams

  // Metric handles, built once.
  struct stats {
    runtime::histogram* ttft = nullptr;
    runtime::histogram* itl = nullptr;
    runtime::histogram* overhead = nullptr;
    runtime::counter* migrations = nullptr;
    runtime::gauge* queue_depth = nullptr;
    std::map<std::string, runtime::counter*> disagg_outcomes;
    runtime::counter& disagg(const std::string& outcome) {
      return *disagg_outcomes.at(outcome);
    }
    static stats make();
  };

  std::shared_ptr<grpc::Channel> channel_for(const std::string& endpoint);
  route_decision place(std::shared_ptr<route_request> req);
  /// Conditional disaggregation: prefills remotely when the policy says so
  /// and returns the KV session for the decode worker `d`.
  std::shared_ptr<kv_session_ref>
  maybe_remote_prefill(const std::vector<uint32_t>& tokens,
                       const route_decision& d);

  caf::actor_system& sys_;
  runtime::slot_ptr<kv_router_actor> router_; // the current incarnation
  int migration_limit_;
  std::optional<disagg_config> disagg_;
  std::optional<double> queue_threshold_;
  bool direct_ = false; // --dispatch direct: straight to the engines
  stats stats_ = stats::make();
  std::atomic<uint64_t> next_id_{0};
  std::atomic<bool> shutting_down_{false};
  // The router actor's generation that last placed a request.
  std::atomic<uint64_t> placed_generation_{0};
  std::mutex mtx_;
  std::map<std::string, std::shared_ptr<grpc::Channel>> channels_; // mtx_
};

} // namespace outrider::router
