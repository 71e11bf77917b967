#include "actors/sidecar/lifecycle.hpp"

#include <map>
#include <thread>

#include <spdlog/spdlog.h>

#include "actors/registrar/registrar.hpp"
#include "actors/sidecar/lifecycle_machine.hpp"
#include "cluster/engine/health_watch.hpp"
#include "cluster/engine/kv_sources_http.hpp"
#include "runtime/metrics.hpp"

namespace outrider::sidecar {

namespace {

namespace cmd = lifecycle_cmd;

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
  std::unique_ptr<lifecycle_machine> machine;
  std::unique_ptr<engine::engine_adapter> adapter;
  std::thread identify_thread;
  std::map<int, kv_forwarder_actor> forwarders;
  std::unique_ptr<engine::health_watch> watch; // stopped in the destructor
  runtime::gauge* serving_gauge = nullptr;
  runtime::counter* transitions = nullptr;
  uint64_t registrar_generation = 0; // of the registrar we registered with
  std::chrono::milliseconds detect_delay{100}; // auto: the next probe's wait
  static inline const char* name = "lifecycle";
};

using self_ptr = lifecycle_actor::stateful_pointer<lifecycle_state>;

void run(self_ptr self, lifecycle_commands cmds);

// The I/O behind each command of the machine; answers go back to it.

void exec(self_ptr self, const cmd::identify& c) {
  // On a thread of its own: the engine calls block.
  auto& st = self->state;
  if (st.identify_thread.joinable())
    st.identify_thread.join();
  auto* adapter = st.adapter.get();
  auto weak = caf::actor_cast<caf::weak_actor_ptr>(self);
  st.identify_thread = std::thread([adapter, weak, attempt = c.attempt] {
    identity_result r;
    r.error = adapter->server_info(r.info);
    if (!r.error)
      r.error = adapter->kv_sources(r.sources);
    if (auto strong = weak.lock())
      caf::anon_send(caf::actor_cast<lifecycle_actor>(strong), std::move(r),
                     attempt);
  });
}

void exec(self_ptr self, const cmd::check_instance& c) {
  auto idx = self->state.cfg.indexer->get();
  auto attempt = c.attempt;
  if (!idx) {
    run(self, self->state.machine->on_instance_check_failed(attempt));
    return;
  }
  self
    ->request(idx, std::chrono::seconds{10}, indexer::instance_atom::value,
              c.instance_id)
    .then(
      [=](bool same) {
        run(self, self->state.machine->on_instance_checked(attempt, same));
      },
      [=](caf::error& e) {
        spdlog::error("sidecar: indexer: {}", self->system().render(e));
        run(self, self->state.machine->on_instance_check_failed(attempt));
      });
}

void exec(self_ptr self, const cmd::ask_next_seq& c) {
  auto idx = self->state.cfg.indexer->get();
  auto attempt = c.attempt;
  auto rank = c.rank;
  if (!idx) {
    run(self, self->state.machine->on_next_seq_failed(attempt));
    return;
  }
  self
    ->request(idx, std::chrono::seconds{10}, indexer::next_seq_atom::value,
              int32_t{rank})
    .then(
      [=](uint64_t next) {
        run(self, self->state.machine->on_next_seq(attempt, rank, next));
      },
      [=](caf::error& e) {
        spdlog::error("sidecar: indexer: {}", self->system().render(e));
        run(self, self->state.machine->on_next_seq_failed(attempt));
      });
}

void exec(self_ptr self, const cmd::start_forwarder& c) {
  auto& st = self->state;
  forwarder_config fc;
  fc.source = c.source;
  fc.next_seq = c.next_seq;
  fc.parent = caf::actor_cast<caf::actor>(self);
  fc.zmq = st.cfg.zmq;
  fc.indexer = st.cfg.indexer;
  fc.max_message_bytes = st.cfg.kv_max_message_bytes;
  fc.max_batch_events = st.cfg.kv_max_batch_events;
  fc.tracer = st.cfg.tracer;
  if (auto i = st.forwarders.find(c.source.rank); i != st.forwarders.end())
    self->send_exit(i->second, caf::exit_reason::user_shutdown);
  auto f = spawn_kv_forwarder(self->system(), fc);
  self->monitor(f);
  st.forwarders[c.source.rank] = f;
}

void exec(self_ptr self, const cmd::stop_forwarders&) {
  auto& st = self->state;
  for (auto& [rank, f] : st.forwarders)
    self->send_exit(f, caf::exit_reason::user_shutdown);
  st.forwarders.clear();
}

void exec(self_ptr self, const cmd::register_worker& c) {
  auto reg = self->state.cfg.registrar->get();
  if (!reg) {
    self->state.cfg.health->set_ready(false);
    return;
  }
  auto attempt = c.attempt;
  auto span = std::make_shared<trace::span>(
    self->state.cfg.tracer->start_event("sidecar.register"));
  span->set("outrider.worker_id", self->state.cfg.worker_id);
  self
    ->request(reg, std::chrono::seconds{5}, registrar::register_atom::value,
              c.record)
    .then(
      [=](bool written) {
        span->set("outrider.written", written);
        span->end();
        run(self, self->state.machine->on_registered(attempt, written));
      },
      [=](caf::error& e) {
        spdlog::error("sidecar: registrar: {}", self->system().render(e));
        span->fail(self->system().render(e));
        span->end();
        run(self, self->state.machine->on_registered(attempt, false));
      });
}

void exec(self_ptr self, const cmd::deregister&) {
  self->state.cfg.tracer->start_event("sidecar.deregister")
    .set("outrider.worker_id", self->state.cfg.worker_id);
  if (auto reg = self->state.cfg.registrar->get())
    self->send(reg, registrar::deregister_atom::value);
}

void exec(self_ptr self, const cmd::set_ready& c) {
  self->state.cfg.health->set_ready(c.ready);
}

void exec(self_ptr self, const cmd::retry_later& c) {
  self->delayed_send(self, c.delay, retry_atom::value, c.attempt);
}

void exec(self_ptr self, const cmd::shutdown_engine& c) {
  auto endpoint = self->state.cfg.engine_endpoint;
  std::thread([protocol = c.protocol, endpoint] {
    auto err = engine::make_engine_adapter(protocol, endpoint)->shutdown();
    if (err)
      spdlog::error("sidecar: cannot shut the engine down: {}", describe(err));
  }).detach();
}

void exec(self_ptr self, const cmd::request_exit& c) {
  self->state.cfg.request_exit(c.code, c.reason);
}

void exec(self_ptr self, const cmd::report& c) {
  self->state.cfg.health->set_component(c.component, c.status, c.detail);
}

void exec(self_ptr self, const cmd::health_changed& c) {
  auto& st = self->state;
  st.transitions->inc();
  st.serving_gauge->set(c.to == engine::engine_health::serving ? 1 : 0);
  st.cfg.tracer->start_event("sidecar.engine_health")
    .set("outrider.worker_id", st.cfg.worker_id)
    .set("outrider.health", engine::to_string(c.to));
}

void run(self_ptr self, lifecycle_commands cmds) {
  for (const auto& c : cmds)
    std::visit([&](const auto& x) { exec(self, x); }, c);
}

void watch_health(self_ptr self, const std::string& protocol) {
  auto weak = caf::actor_cast<caf::weak_actor_ptr>(self);
  self->state.watch = std::make_unique<engine::health_watch>(
    self->state.cfg.engine_endpoint, engine::health_watch::backoff{},
    [weak](engine::engine_health h, const std::string& detail) {
      if (auto strong = weak.lock())
        caf::anon_send(caf::actor_cast<lifecycle_actor>(strong),
                       engine_status_atom::value, static_cast<int32_t>(h),
                       detail);
    },
    // SGLang's health stays SERVING while paused: its engine state says.
    protocol == "sglang" ? engine::health_watch::source::sglang_state
                         : engine::health_watch::source::grpc_health);
}

// --engine-protocol auto: asks the engine which services it offers, on the
// identify thread (the calls block); the answer comes back as detect_atom.
void detect(self_ptr self) {
  auto& st = self->state;
  if (st.identify_thread.joinable())
    st.identify_thread.join();
  auto* adapter = st.adapter.get();
  auto weak = caf::actor_cast<caf::weak_actor_ptr>(self);
  st.identify_thread = std::thread([adapter, weak] {
    engine::engine_info info;
    auto err = adapter->server_info(info);
    if (auto strong = weak.lock())
      caf::anon_send(caf::actor_cast<lifecycle_actor>(strong),
                     detect_atom::value, err ? std::string{} : info.protocol,
                     err ? describe(err) : std::string{});
  });
}

lifecycle_actor::behavior_type lifecycle(self_ptr self, lifecycle_config cfg) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  st.machine = std::make_unique<lifecycle_machine>(lifecycle_machine::config{
    st.cfg.worker_id, st.cfg.relay_endpoint, st.cfg.engine_endpoint,
    st.cfg.shutdown_engine_on_gap, "0.1.0", st.cfg.http_endpoint});
  auto& m = runtime::global_metrics();
  st.serving_gauge = &m.get_gauge("outrider_engine_serving",
                                  "1 while the engine reports SERVING");
  st.transitions = &m.get_counter("outrider_engine_health_changes_total",
                                  "Changes of the engine's health status");
  st.cfg.health->set_component("engine", "waiting", st.cfg.engine_endpoint);
  st.adapter =
    engine::make_engine_adapter(st.cfg.engine_protocol, st.cfg.engine_endpoint);
  if (!st.cfg.engine_http.empty())
    st.adapter =
      engine::with_http_kv_discovery(std::move(st.adapter), st.cfg.engine_http);
  if (st.cfg.engine_protocol == "auto")
    self->send(self, detect_atom::value);
  else
    watch_health(self, st.cfg.engine_protocol);
  self->delayed_send(self, st.cfg.startup_deadline, deadline_atom::value);
  st.registrar_generation = st.cfg.registrar->generation();
  self->send(self, tick_atom::value);
  self->set_down_handler([=](caf::down_msg& dm) {
    auto& st = self->state;
    for (auto i = st.forwarders.begin(); i != st.forwarders.end(); ++i)
      if (i->second.address() == dm.source) {
        auto rank = i->first;
        spdlog::warn("sidecar: KV forwarder for rank {} stopped ({})", rank,
                     self->system().render(dm.reason));
        st.forwarders.erase(i);
        run(self, st.machine->on_forwarder_down(rank));
        return;
      }
  });
  spdlog::info(
    "sidecar: waiting for engine at {} (deadline {} s)", st.cfg.engine_endpoint,
    std::chrono::duration_cast<std::chrono::seconds>(st.cfg.startup_deadline)
      .count());
  return {
    [=](engine_status_atom, int32_t raw, const std::string& detail) {
      auto h = static_cast<engine::engine_health>(raw);
      run(self, self->state.machine->on_health(h, detail));
    },
    [=](retry_atom, uint64_t attempt) {
      run(self, self->state.machine->on_retry(attempt));
    },
    [=](identity_result& r, uint64_t attempt) {
      auto& mc = *self->state.machine;
      run(self, !r.error ? mc.on_identity(attempt, std::move(r.info),
                                          std::move(r.sources))
                         : mc.on_identity_failed(attempt, describe(r.error)));
    },
    [=](caught_up_atom, int32_t rank) {
      run(self, self->state.machine->on_caught_up(rank));
    },
    [=](kv_gap_atom, int32_t rank) {
      run(self, self->state.machine->on_kv_gap(rank));
    },
    [=](deadline_atom) { run(self, self->state.machine->on_deadline()); },
    [=](store_atom, bool ok, const std::string& why) {
      run(self, self->state.machine->on_index_store(ok, why));
    },
    [=](listener_atom, bool ok, const std::string& why) {
      run(self, self->state.machine->on_relay_listener(ok, why));
    },
    [=](detect_atom) { detect(self); },
    [=](detect_atom, const std::string& protocol, const std::string& why) {
      auto& st = self->state;
      if (protocol.empty()) {
        // Not up yet (or answering nonsense): ask again, backing off.
        spdlog::debug("sidecar: engine protocol not detected yet: {}", why);
        self->delayed_send(self, st.detect_delay, detect_atom::value);
        st.detect_delay =
          std::min(st.detect_delay * 2, std::chrono::milliseconds{1000});
        return;
      }
      spdlog::info("sidecar: the engine at {} speaks {}",
                   st.cfg.engine_endpoint, protocol);
      if (st.cfg.on_dialect)
        st.cfg.on_dialect(engine::dialect_of(protocol));
      watch_health(self, protocol);
    },
    [=](stopping_atom) { run(self, self->state.machine->on_stopping()); },
    [=](tick_atom) {
      // A restarted registrar starts without our record.
      auto& st = self->state;
      if (auto g = st.cfg.registrar->generation();
          g != st.registrar_generation) {
        st.registrar_generation = g;
        run(self, st.machine->on_registrar_restarted());
      }
      self->delayed_send(self, std::chrono::milliseconds{250},
                         tick_atom::value);
    },
  };
}

} // namespace

lifecycle_actor spawn_lifecycle(caf::actor_system& sys, lifecycle_config cfg) {
  return sys.spawn(lifecycle, std::move(cfg));
}

} // namespace outrider::sidecar
