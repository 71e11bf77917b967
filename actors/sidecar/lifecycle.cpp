#include "actors/sidecar/lifecycle.hpp"

#include <map>
#include <set>
#include <thread>

#include <spdlog/spdlog.h>

#include "actors/registrar/registrar.hpp"
#include "actors/sidecar/health_watch.hpp"
#include "runtime/metrics.hpp"

namespace outrider::sidecar {

namespace {

struct lifecycle_state {
  lifecycle_state() = default;
  ~lifecycle_state() {
    // Forwarders are detached: stop them explicitly.
    for (auto& [rank, f] : forwarders)
      caf::anon_send_exit(f, caf::exit_reason::user_shutdown);
    if (identify_thread.joinable())
      identify_thread.join();
  }
  lifecycle_config cfg;
  engine_health last = engine_health::unknown;
  bool ever_serving = false;
  // The identity of the engine behind the current connection.
  bool identified = false;
  uint64_t attempt = 0; // invalidates answers to older identity calls
  std::unique_ptr<engine_adapter> adapter;
  std::thread identify_thread;
  engine_info info;
  std::map<int, kv_forwarder_actor> forwarders;
  std::set<int> caught_up;
  size_t expected_sources = 0;
  std::unique_ptr<health_watch> watch; // stopped in the destructor
  runtime::gauge* serving_gauge = nullptr;
  runtime::counter* transitions = nullptr;
  static inline const char* name = "lifecycle";
};

using self_ptr = lifecycle_actor::stateful_pointer<lifecycle_state>;

bool index_ready(const lifecycle_state& st) {
  return st.identified && st.caught_up.size() >= st.expected_sources;
}

// Registers (and turns ready) exactly when the engine serves and the index
// has caught up; otherwise withdraws.
void reconcile(self_ptr self) {
  auto& st = self->state;
  bool want = st.last == engine_health::serving && index_ready(st);
  auto reg = registrar::current_registrar(self->system());
  if (want && reg) {
    cluster::worker_record r;
    r.worker_id = st.cfg.worker_id;
    r.instance_id = st.info.instance_id;
    r.model = st.info.model;
    r.role = st.info.role;
    r.relay_endpoint = st.cfg.relay_endpoint;
    r.engine_endpoint = st.cfg.engine_endpoint;
    r.protocol = st.info.protocol;
    r.kv_block_size = st.info.kv_block_size;
    r.total_kv_blocks = st.info.total_kv_blocks;
    r.data_parallel_size = st.info.data_parallel_size;
    r.version = "0.1.0";
    // Ready only once the record is written (and if still wanted then).
    auto attempt = st.attempt;
    self
      ->request(reg, std::chrono::seconds{5}, registrar::register_atom::value,
                r)
      .then(
        [=](bool written) {
          auto& st = self->state;
          bool still = st.attempt == attempt &&
                       st.last == engine_health::serving && index_ready(st);
          st.cfg.health->set_ready(written && still);
        },
        [=](caf::error& e) {
          spdlog::error("sidecar: registrar: {}", self->system().render(e));
        });
    return;
  }
  if (reg)
    self->send(reg, registrar::deregister_atom::value);
  st.cfg.health->set_ready(false);
}

void stop_forwarders(self_ptr self) {
  auto& st = self->state;
  for (auto& [rank, f] : st.forwarders)
    self->send_exit(f, caf::exit_reason::user_shutdown);
  st.forwarders.clear();
  st.caught_up.clear();
}

// Asks the engine who it is, on a thread of its own (the calls block).
void identify(self_ptr self) {
  auto& st = self->state;
  auto attempt = ++st.attempt;
  if (st.identify_thread.joinable())
    st.identify_thread.join();
  auto* adapter = st.adapter.get();
  auto weak = caf::actor_cast<caf::weak_actor_ptr>(self);
  st.identify_thread = std::thread([adapter, weak, attempt] {
    identity_result r;
    r.error = adapter->server_info(r.info);
    if (r.error.empty())
      r.error = adapter->kv_sources(r.sources);
    if (auto strong = weak.lock())
      caf::anon_send(caf::actor_cast<lifecycle_actor>(strong), std::move(r),
                     attempt);
  });
}

void on_identity(self_ptr self, identity_result& r) {
  auto& st = self->state;
  if (!r.error.empty()) {
    spdlog::warn("sidecar: cannot read the engine's identity: {}", r.error);
    st.cfg.health->set_component("engine_identity", "error", r.error);
    self->delayed_send(self, std::chrono::milliseconds{500}, retry_atom::value,
                       st.attempt);
    return;
  }
  st.info = r.info;
  st.cfg.health->set_component("engine_identity", "known",
                               r.info.protocol + " instance " +
                                 r.info.instance_id);
  auto idx = indexer::current_indexer(self->system());
  if (!idx) {
    self->delayed_send(self, std::chrono::milliseconds{200}, retry_atom::value,
                       st.attempt);
    return;
  }
  auto attempt = st.attempt;
  auto sources = std::move(r.sources);
  self
    ->request(idx, std::chrono::seconds{10}, indexer::instance_atom::value,
              r.info.instance_id)
    .then(
      [=](bool same) {
        auto& st = self->state;
        if (attempt != st.attempt)
          return;
        spdlog::info("sidecar: engine instance {} ({}): index {}",
                     st.info.instance_id, st.info.protocol,
                     same ? "kept" : "reset");
        stop_forwarders(self);
        st.expected_sources = sources.size();
        st.identified = true;
        for (const auto& src : sources) {
          self
            ->request(idx, std::chrono::seconds{10},
                      indexer::next_seq_atom::value, int32_t{src.rank})
            .then(
              [=](uint64_t next) {
                auto& st = self->state;
                if (attempt != st.attempt)
                  return;
                forwarder_config fc;
                fc.source = src;
                fc.next_seq = next;
                fc.parent = caf::actor_cast<caf::actor>(self);
                fc.zmq = st.cfg.zmq;
                auto f = spawn_kv_forwarder(self->system(), fc);
                self->monitor(f);
                st.forwarders[src.rank] = f;
              },
              [=](caf::error& e) {
                spdlog::error("sidecar: indexer: {}", self->system().render(e));
              });
        }
        reconcile(self);
      },
      [=](caf::error& e) {
        spdlog::error("sidecar: indexer: {}", self->system().render(e));
        self->delayed_send(self, std::chrono::milliseconds{500},
                           retry_atom::value, attempt);
      });
}

lifecycle_actor::behavior_type lifecycle(self_ptr self, lifecycle_config cfg) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  auto& m = runtime::global_metrics();
  st.serving_gauge = &m.get_gauge("outrider_engine_serving",
                                  "1 while the engine reports SERVING");
  st.transitions = &m.get_counter("outrider_engine_health_changes_total",
                                  "Changes of the engine's health status");
  st.cfg.health->set_component("engine", "waiting", st.cfg.engine_endpoint);
  st.adapter =
    make_engine_adapter(st.cfg.engine_protocol, st.cfg.engine_endpoint);
  auto weak = caf::actor_cast<caf::weak_actor_ptr>(self);
  st.watch = std::make_unique<health_watch>(
    st.cfg.engine_endpoint, health_watch::backoff{},
    [weak](engine_health h, const std::string& detail) {
      if (auto strong = weak.lock())
        caf::anon_send(caf::actor_cast<lifecycle_actor>(strong),
                       engine_status_atom::value, static_cast<int32_t>(h),
                       detail);
    });
  self->delayed_send(self, st.cfg.startup_deadline, deadline_atom::value);
  self->set_down_handler([=](caf::down_msg& dm) {
    auto& st = self->state;
    for (auto i = st.forwarders.begin(); i != st.forwarders.end(); ++i)
      if (i->second.address() == dm.source) {
        spdlog::warn("sidecar: KV forwarder for rank {} stopped ({}); "
                     "re-reading the engine",
                     i->first, self->system().render(dm.reason));
        st.forwarders.erase(i);
        st.identified = false;
        reconcile(self);
        if (st.last == engine_health::serving)
          identify(self);
        return;
      }
  });
  spdlog::info(
    "sidecar: waiting for engine at {} (deadline {} s)", st.cfg.engine_endpoint,
    std::chrono::duration_cast<std::chrono::seconds>(st.cfg.startup_deadline)
      .count());
  return {
    [=](engine_status_atom, int32_t raw, const std::string& detail) {
      auto& st = self->state;
      auto h = static_cast<engine_health>(raw);
      if (h == st.last)
        return;
      st.transitions->inc();
      spdlog::info("sidecar: engine {} -> {}{}{}", to_string(st.last),
                   to_string(h), detail.empty() ? "" : ": ", detail);
      st.last = h;
      bool serving = h == engine_health::serving;
      st.ever_serving |= serving;
      st.serving_gauge->set(serving ? 1 : 0);
      st.cfg.health->set_component("engine", to_string(h), detail);
      if (h == engine_health::unreachable) {
        // The process behind the connection is gone: whatever comes back
        // must prove who it is; its sequence numbers start over.
        st.identified = false;
        ++st.attempt;
        stop_forwarders(self);
      }
      reconcile(self);
      if (serving && !st.identified)
        identify(self);
    },
    [=](retry_atom, uint64_t attempt) {
      auto& st = self->state;
      if (attempt == st.attempt && !st.identified &&
          st.last == engine_health::serving)
        identify(self);
    },
    [=](identity_result& r, uint64_t attempt) {
      if (attempt == self->state.attempt)
        on_identity(self, r);
    },
    [=](caught_up_atom, int32_t rank) {
      auto& st = self->state;
      st.caught_up.insert(rank);
      spdlog::info("sidecar: KV events of rank {} caught up", rank);
      reconcile(self);
    },
    [=](kv_gap_atom, int32_t rank) {
      auto& st = self->state;
      spdlog::warn("sidecar: rank {} lost KV history; it was reset", rank);
      if (!st.cfg.shutdown_engine_on_gap)
        return;
      // Stay deregistered until the engine is back as a new instance.
      st.identified = false;
      ++st.attempt;
      reconcile(self);
      spdlog::warn("sidecar: --on-kv-gap shutdown-engine: stopping the engine");
      auto protocol = st.info.protocol;
      auto endpoint = st.cfg.engine_endpoint;
      std::thread([protocol, endpoint] {
        auto err = make_engine_adapter(protocol, endpoint)->shutdown();
        if (!err.empty())
          spdlog::error("sidecar: cannot shut the engine down: {}", err);
      }).detach();
    },
    [=](deadline_atom) {
      auto& st = self->state;
      if (st.ever_serving)
        return;
      spdlog::error("sidecar: engine at {} not SERVING within the startup "
                    "deadline",
                    st.cfg.engine_endpoint);
      st.cfg.health->set_component("engine", "startup_deadline_exceeded");
      st.cfg.request_exit(1, "engine startup deadline exceeded");
    },
  };
}

} // namespace

lifecycle_actor spawn_lifecycle(caf::actor_system& sys, lifecycle_config cfg) {
  return sys.spawn(lifecycle, std::move(cfg));
}

} // namespace outrider::sidecar
