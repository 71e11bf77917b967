#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "cluster/engine/engine_info.hpp"
#include "cluster/worker_record.hpp"

namespace outrider::sidecar {

/// What the lifecycle machine asks its owner to do. Answers come back as
/// events carrying the same `attempt`; answers to an older attempt (the
/// engine changed in between) are ignored.
namespace lifecycle_cmd {
/// Ask the engine who it is (server info + KV sources).
struct identify {
  uint64_t attempt;
};
/// Ask the indexer whether `instance_id` is the one its index belongs to
/// (it resets the index when not).
struct check_instance {
  std::string instance_id;
  uint64_t attempt;
};
/// Ask the indexer for the next sequence number of a rank.
struct ask_next_seq {
  int rank;
  uint64_t attempt;
};
struct start_forwarder {
  engine::kv_source source;
  uint64_t next_seq;
};
struct stop_forwarders {};
/// Write the record; answer with `on_registered`.
struct register_worker {
  cluster::worker_record record;
  uint64_t attempt;
};
struct deregister {};
struct set_ready {
  bool ready;
};
/// Send `on_retry(attempt)` after `delay`.
struct retry_later {
  std::chrono::milliseconds delay;
  uint64_t attempt;
};
/// --on-kv-gap shutdown-engine.
struct shutdown_engine {
  std::string protocol;
};
struct request_exit {
  int code;
  std::string reason;
};
/// A line for `/health`.
struct report {
  std::string component;
  std::string status;
  std::string detail;
};
/// The engine's health changed (metrics).
struct health_changed {
  engine::engine_health to;
};
} // namespace lifecycle_cmd

using lifecycle_command =
  std::variant<lifecycle_cmd::identify, lifecycle_cmd::check_instance,
               lifecycle_cmd::ask_next_seq, lifecycle_cmd::start_forwarder,
               lifecycle_cmd::stop_forwarders, lifecycle_cmd::register_worker,
               lifecycle_cmd::deregister, lifecycle_cmd::set_ready,
               lifecycle_cmd::retry_later, lifecycle_cmd::shutdown_engine,
               lifecycle_cmd::request_exit, lifecycle_cmd::report,
               lifecycle_cmd::health_changed>;

using lifecycle_commands = std::vector<lifecycle_command>;

/// The sidecar lifecycle of DESIGN.md as a state machine: events in,
/// commands out; no actors, threads or sockets. It registers the worker
/// exactly while the engine serves, its identity is known and every rank's
/// KV events have caught up, and withdraws it otherwise. Single-threaded.
class lifecycle_machine {
 public:
  struct config {
    std::string worker_id;
    std::string relay_endpoint;
    std::string engine_endpoint;
    bool shutdown_engine_on_gap = false;
    std::string version = "0.1.0";
    std::string http_endpoint; // the engine's OpenAI HTTP (gateways)
  };

  explicit lifecycle_machine(config cfg);

  /// The engine's health as its Watch stream reports it.
  lifecycle_commands on_health(engine::engine_health h,
                               const std::string& detail);
  lifecycle_commands on_identity(uint64_t attempt, engine::engine_info info,
                                 std::vector<engine::kv_source> sources);
  lifecycle_commands on_identity_failed(uint64_t attempt,
                                        const std::string& error);
  /// The indexer's answer: `same` keeps the index, else it was reset.
  lifecycle_commands on_instance_checked(uint64_t attempt, bool same);
  lifecycle_commands on_instance_check_failed(uint64_t attempt);
  lifecycle_commands on_next_seq(uint64_t attempt, int rank, uint64_t next);
  /// The indexer did not say where a rank stands: read the engine again.
  lifecycle_commands on_next_seq_failed(uint64_t attempt);
  lifecycle_commands on_retry(uint64_t attempt);
  lifecycle_commands on_caught_up(int rank);
  /// A rank lost KV history (its forwarder has reset it).
  lifecycle_commands on_kv_gap(int rank);
  /// A forwarder stopped: re-read the engine.
  lifecycle_commands on_forwarder_down(int rank);
  lifecycle_commands on_registered(uint64_t attempt, bool written);
  /// The startup deadline passed.
  lifecycle_commands on_deadline();
  /// The registrar was restarted (its record went with it): write it again
  /// if it is wanted.
  lifecycle_commands on_registrar_restarted();
  /// SIGTERM: withdraw and turn unready.
  lifecycle_commands on_stopping();
  /// The index's store fails to write (a full disk, say: `why`) or works
  /// again: a worker whose index no longer follows its engine is withdrawn
  /// and unready until it does.
  lifecycle_commands on_index_store(bool ok, const std::string& why);
  /// The relay's listener stopped accepting connections (`why`), or
  /// accepts again: a worker no new router can reach is withdrawn and
  /// unready until it does.
  lifecycle_commands on_relay_listener(bool ok, const std::string& why);

  bool identified() const { return identified_; }
  uint64_t attempt() const { return attempt_; }
  const engine::engine_info& info() const { return info_; }
  /// Registered (the record is wanted) right now.
  bool wants_registration() const;

 private:
  void reconcile(lifecycle_commands& out);
  void identify(lifecycle_commands& out);
  void forget_forwarders(lifecycle_commands& out);
  cluster::worker_record record() const;

  config cfg_;
  engine::engine_health health_ = engine::engine_health::unknown;
  bool ever_serving_ = false;
  bool stopping_ = false;
  bool store_failing_ = false;
  bool listener_failing_ = false;
  bool identified_ = false;
  uint64_t attempt_ = 0;
  engine::engine_info info_;
  std::map<int, engine::kv_source> sources_;         // of the current attempt
  std::map<int, engine::kv_source> pending_sources_; // read, not yet checked
  std::set<int> caught_up_;
  size_t expected_sources_ = 0;
};

} // namespace outrider::sidecar
