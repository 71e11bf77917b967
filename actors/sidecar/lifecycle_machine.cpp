#include "actors/sidecar/lifecycle_machine.hpp"

#include <spdlog/spdlog.h>

namespace outrider::sidecar {

namespace cmd = lifecycle_cmd;

namespace {

constexpr std::chrono::milliseconds identity_retry{500};

} // namespace

lifecycle_machine::lifecycle_machine(config cfg) : cfg_(std::move(cfg)) {}

bool lifecycle_machine::wants_registration() const {
  return !stopping_ && !store_failing_ && !listener_failing_ &&
         health_ == engine::engine_health::serving && identified_ &&
         caught_up_.size() >= expected_sources_;
}

cluster::worker_record lifecycle_machine::record() const {
  cluster::worker_record r;
  r.worker_id = cfg_.worker_id;
  r.instance_id = info_.instance_id;
  r.model = info_.model;
  r.role = info_.role;
  r.relay_endpoint = cfg_.relay_endpoint;
  r.engine_endpoint = cfg_.engine_endpoint;
  r.protocol = info_.protocol;
  r.bootstrap_endpoint = info_.bootstrap_endpoint;
  r.http_endpoint = cfg_.http_endpoint;
  r.kv_block_size = info_.kv_block_size;
  r.total_kv_blocks = info_.total_kv_blocks;
  r.data_parallel_size = info_.data_parallel_size;
  r.version = cfg_.version;
  r.lora_adapters = info_.lora_adapters;
  return r;
}

// Registers exactly when the engine serves and the index has caught up;
// otherwise withdraws. Ready follows the written record (on_registered).
void lifecycle_machine::reconcile(lifecycle_commands& out) {
  if (wants_registration()) {
    out.emplace_back(cmd::register_worker{record(), attempt_});
    return;
  }
  out.emplace_back(cmd::deregister{});
  out.emplace_back(cmd::set_ready{false});
}

void lifecycle_machine::identify(lifecycle_commands& out) {
  out.emplace_back(cmd::identify{++attempt_});
}

void lifecycle_machine::forget_forwarders(lifecycle_commands& out) {
  out.emplace_back(cmd::stop_forwarders{});
  sources_.clear();
  caught_up_.clear();
}

lifecycle_commands lifecycle_machine::on_health(engine::engine_health h,
                                                const std::string& detail) {
  lifecycle_commands out;
  if (h == health_)
    return out;
  spdlog::info("sidecar: engine {} -> {}{}{}", to_string(health_), to_string(h),
               detail.empty() ? "" : ": ", detail);
  health_ = h;
  bool serving = h == engine::engine_health::serving;
  ever_serving_ |= serving;
  out.emplace_back(cmd::health_changed{h});
  out.emplace_back(cmd::report{"engine", to_string(h), detail});
  if (h == engine::engine_health::unreachable) {
    // The process behind the connection is gone: whatever comes back must
    // prove who it is; its sequence numbers start over. The index is kept
    // until then.
    identified_ = false;
    ++attempt_;
    forget_forwarders(out);
  }
  reconcile(out);
  if (serving && !identified_)
    identify(out);
  return out;
}

lifecycle_commands
lifecycle_machine::on_identity(uint64_t attempt, engine::engine_info info,
                               std::vector<engine::kv_source> sources) {
  lifecycle_commands out;
  if (attempt != attempt_)
    return out;
  info_ = std::move(info);
  out.emplace_back(
    cmd::report{"engine_identity", "known",
                info_.protocol + " instance " + info_.instance_id});
  std::map<int, engine::kv_source> by_rank;
  for (auto& s : sources)
    by_rank[s.rank] = std::move(s);
  pending_sources_ = std::move(by_rank);
  out.emplace_back(cmd::check_instance{info_.instance_id, attempt_});
  return out;
}

lifecycle_commands
lifecycle_machine::on_identity_failed(uint64_t attempt,
                                      const std::string& error) {
  lifecycle_commands out;
  if (attempt != attempt_)
    return out;
  spdlog::warn("sidecar: cannot read the engine's identity: {}", error);
  out.emplace_back(cmd::report{"engine_identity", "error", error});
  out.emplace_back(cmd::retry_later{identity_retry, attempt_});
  return out;
}

lifecycle_commands lifecycle_machine::on_instance_checked(uint64_t attempt,
                                                          bool same) {
  lifecycle_commands out;
  if (attempt != attempt_)
    return out;
  spdlog::info("sidecar: engine instance {} ({}): index {}", info_.instance_id,
               info_.protocol, same ? "kept" : "reset");
  forget_forwarders(out);
  sources_ = std::move(pending_sources_);
  pending_sources_.clear();
  expected_sources_ = sources_.size();
  identified_ = true;
  for (const auto& [rank, src] : sources_)
    out.emplace_back(cmd::ask_next_seq{rank, attempt_});
  reconcile(out);
  return out;
}

lifecycle_commands
lifecycle_machine::on_instance_check_failed(uint64_t attempt) {
  lifecycle_commands out;
  if (attempt == attempt_)
    out.emplace_back(cmd::retry_later{identity_retry, attempt_});
  return out;
}

lifecycle_commands lifecycle_machine::on_next_seq(uint64_t attempt, int rank,
                                                  uint64_t next) {
  lifecycle_commands out;
  auto i = sources_.find(rank);
  if (attempt != attempt_ || i == sources_.end())
    return out;
  out.emplace_back(cmd::start_forwarder{i->second, next});
  return out;
}

lifecycle_commands lifecycle_machine::on_next_seq_failed(uint64_t attempt) {
  lifecycle_commands out;
  if (attempt != attempt_)
    return out;
  identified_ = false;
  forget_forwarders(out);
  reconcile(out);
  out.emplace_back(cmd::retry_later{identity_retry, attempt_});
  return out;
}

lifecycle_commands lifecycle_machine::on_retry(uint64_t attempt) {
  lifecycle_commands out;
  if (attempt != attempt_)
    return out;
  if (!identified_ && health_ == engine::engine_health::serving)
    identify(out);
  else if (wants_registration()) // a registration that failed
    reconcile(out);
  return out;
}

lifecycle_commands lifecycle_machine::on_caught_up(int rank) {
  lifecycle_commands out;
  if (!sources_.count(rank))
    return out; // a forwarder of an older attempt
  caught_up_.insert(rank);
  spdlog::info("sidecar: KV events of rank {} caught up", rank);
  reconcile(out);
  return out;
}

lifecycle_commands lifecycle_machine::on_index_store(bool ok,
                                                     const std::string& why) {
  lifecycle_commands out;
  if (store_failing_ == !ok)
    return out;
  store_failing_ = !ok;
  if (ok)
    spdlog::info("sidecar: the index's store writes again");
  else
    spdlog::error("sidecar: the index's store cannot write ({}): withdrawn "
                  "until it can",
                  why);
  out.emplace_back(cmd::report{"index", ok ? "ok" : "store_failing", why});
  reconcile(out);
  return out;
}

lifecycle_commands
lifecycle_machine::on_relay_listener(bool ok, const std::string& why) {
  lifecycle_commands out;
  if (listener_failing_ == !ok)
    return out;
  listener_failing_ = !ok;
  if (ok)
    spdlog::info("sidecar: the relay accepts connections again");
  else
    spdlog::error("sidecar: the relay does not accept connections ({}): "
                  "withdrawn until it does",
                  why);
  out.emplace_back(
    cmd::report{"relay_listener", ok ? "accepting" : "not_accepting", why});
  reconcile(out);
  return out;
}

lifecycle_commands lifecycle_machine::on_kv_gap(int rank) {
  lifecycle_commands out;
  spdlog::warn("sidecar: rank {} lost KV history; it was reset", rank);
  if (!cfg_.shutdown_engine_on_gap)
    return out;
  // Stay deregistered until the engine is back as a new instance.
  identified_ = false;
  ++attempt_;
  reconcile(out);
  spdlog::warn("sidecar: --on-kv-gap shutdown-engine: stopping the engine");
  out.emplace_back(cmd::shutdown_engine{info_.protocol});
  return out;
}

lifecycle_commands lifecycle_machine::on_forwarder_down(int rank) {
  lifecycle_commands out;
  spdlog::warn("sidecar: KV forwarder for rank {} stopped; re-reading the "
               "engine",
               rank);
  caught_up_.erase(rank);
  identified_ = false;
  reconcile(out);
  if (health_ == engine::engine_health::serving)
    identify(out);
  return out;
}

lifecycle_commands lifecycle_machine::on_registered(uint64_t attempt,
                                                    bool written) {
  lifecycle_commands out;
  // Ready only once the record is written, and if it is still wanted.
  bool current = attempt == attempt_ && wants_registration();
  out.emplace_back(cmd::set_ready{written && current});
  if (!written && current) // e.g. a full disk: try again shortly
    out.emplace_back(cmd::retry_later{identity_retry, attempt_});
  return out;
}

lifecycle_commands lifecycle_machine::on_deadline() {
  lifecycle_commands out;
  if (ever_serving_)
    return out;
  spdlog::error("sidecar: engine at {} not SERVING within the startup "
                "deadline",
                cfg_.engine_endpoint);
  out.emplace_back(cmd::report{"engine", "startup_deadline_exceeded", ""});
  out.emplace_back(cmd::request_exit{1, "engine startup deadline exceeded"});
  return out;
}

lifecycle_commands lifecycle_machine::on_registrar_restarted() {
  lifecycle_commands out;
  if (wants_registration()) {
    spdlog::warn("sidecar: the registrar restarted; registering again");
    reconcile(out);
  }
  return out;
}

lifecycle_commands lifecycle_machine::on_stopping() {
  lifecycle_commands out;
  stopping_ = true;
  reconcile(out);
  return out;
}

} // namespace outrider::sidecar
