#include "actors/sidecar/lifecycle.hpp"

#include <spdlog/spdlog.h>

#include "actors/sidecar/health_watch.hpp"
#include "runtime/metrics.hpp"

namespace outrider::sidecar {

namespace {

struct lifecycle_state {
  lifecycle_state() = default;
  lifecycle_config cfg;
  engine_health last = engine_health::unknown;
  bool ever_serving = false;
  std::unique_ptr<health_watch> watch; // stopped in the destructor
  runtime::gauge* serving_gauge = nullptr;
  runtime::counter* transitions = nullptr;
  static inline const char* name = "lifecycle";
};

lifecycle_actor::behavior_type
lifecycle(lifecycle_actor::stateful_pointer<lifecycle_state> self,
          lifecycle_config cfg) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  auto& m = runtime::global_metrics();
  st.serving_gauge = &m.get_gauge("outrider_engine_serving",
                                  "1 while the engine reports SERVING");
  st.transitions = &m.get_counter("outrider_engine_health_changes_total",
                                  "Changes of the engine's health status");
  st.cfg.health->set_component("engine", "waiting", st.cfg.engine_endpoint);
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
      st.cfg.health->set_ready(serving);
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
