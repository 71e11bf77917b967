#include "actors/registrar/registrar.hpp"

#include <spdlog/spdlog.h>

#include "runtime/metrics.hpp"

namespace outrider::registrar {

namespace {

struct registrar_state {
  registrar_state() = default;
  ~registrar_state() {
    // Stopping withdraws the record: a clean shutdown never leaves it to
    // expire.
    if (disc && registered) {
      disc->remove(record.worker_id);
      spdlog::info("registrar: withdrew {} on stop", record.worker_id);
    }
    if (gauge)
      gauge->set(0);
  }
  std::shared_ptr<cluster::discovery> disc;
  std::chrono::milliseconds ttl{10000};
  std::string worker_id; // ours, known before the first registration
  cluster::worker_record record;
  bool registered = false;
  uint64_t generation = 0; // invalidates keep-alive timers
  runtime::gauge* gauge = nullptr;
  static inline const char* name = "registrar";
};

using self_ptr = registrar_actor::stateful_pointer<registrar_state>;

registrar_actor::behavior_type registrar(self_ptr self,
                                         std::shared_ptr<cluster::discovery> d,
                                         std::chrono::milliseconds ttl,
                                         std::string worker_id) {
  auto& st = self->state;
  st.worker_id = std::move(worker_id);
  st.disc = std::move(d);
  st.ttl = ttl;
  st.gauge = &runtime::global_metrics().get_gauge(
    "outrider_registered", "1 while this worker's record is published");
  return {
    [=](register_atom, const cluster::worker_record& r) -> bool {
      auto& st = self->state;
      if (auto err = st.disc->put(r)) {
        spdlog::error("registrar: {}", describe(err));
        return false;
      }
      st.record = r;
      st.registered = true;
      st.gauge->set(1);
      spdlog::info("registrar: registered {} (engine instance {})", r.worker_id,
                   r.instance_id);
      self->delayed_send(self, st.ttl / 3, keepalive_atom::value,
                         ++st.generation);
      return true;
    },
    [=](deregister_atom) {
      auto& st = self->state;
      ++st.generation;
      bool was = st.registered;
      st.registered = false;
      st.gauge->set(0);
      // Also withdraws a record a crashed predecessor with our id left.
      if (!st.record.worker_id.empty() || !st.worker_id.empty()) {
        auto id =
          st.record.worker_id.empty() ? st.worker_id : st.record.worker_id;
        if (auto err = st.disc->remove(id))
          spdlog::error("registrar: {}", describe(err));
      }
      if (was)
        spdlog::info("registrar: deregistered {}", st.record.worker_id);
    },
    [=](keepalive_atom, uint64_t gen) {
      auto& st = self->state;
      if (gen != st.generation || !st.registered)
        return;
      if (auto err = st.disc->keep_alive(st.record.worker_id)) {
        // The record vanished (e.g. removed as stale): write it again.
        spdlog::warn("registrar: {}; publishing again", describe(err));
        if (auto again = st.disc->put(st.record))
          spdlog::error("registrar: {}", describe(again));
      }
      self->delayed_send(self, st.ttl / 3, keepalive_atom::value, gen);
    },
  };
}

} // namespace

registrar_actor spawn_registrar(caf::actor_system& sys,
                                std::shared_ptr<cluster::discovery> disc,
                                std::chrono::milliseconds ttl,
                                std::string worker_id) {
  return sys.spawn(registrar, std::move(disc), ttl, std::move(worker_id));
}

} // namespace outrider::registrar
