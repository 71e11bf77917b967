#include "runtime/supervisor.hpp"

#include <deque>

#include <spdlog/spdlog.h>

#include "runtime/errors.hpp"
#include "runtime/metrics.hpp"

namespace outrider::runtime {

namespace {

using time_point = caf::actor_clock::time_point;

struct child_slot {
  child_spec spec;
  caf::actor handle;
  uint64_t generation = 0;
  uint64_t restarts = 0;
  caf::timespan backoff{0};
  time_point started;
  std::deque<time_point> failures; // within the restart window
};

struct supervisor_state {
  supervisor_state() = default;
  supervisor_policy policy;
  std::vector<child_slot> children;
  bool stopping = false;
  caf::error stop_reason;

  child_slot* find(const std::string& name) {
    for (auto& c : children)
      if (c.spec.name == name)
        return &c;
    return nullptr;
  }

  static inline const char* name = "supervisor";
};

using supervisor_actor = caf::stateful_actor<supervisor_state>;

counter& failures_of(const std::string& actor) {
  return global_metrics().get_counter("outrider_actor_failures_total",
                                      "Abnormal exits of supervised actors",
                                      {{"actor", actor}});
}

void start_child(supervisor_actor* self, child_slot& c) {
  failures_of(c.spec.name); // shows (at 0) before any failure: alerts read it
  c.handle = c.spec.start(self->system());
  c.generation += 1;
  c.started = self->clock().now();
  self->monitor(c.handle);
  spdlog::debug("supervisor: started {}", c.spec.name);
}

// Stops the last running child; the supervisor quits when none is left.
void stop_next(supervisor_actor* self) {
  auto& st = self->state;
  for (auto i = st.children.rbegin(); i != st.children.rend(); ++i) {
    if (i->handle) {
      self->send_exit(i->handle, st.stop_reason);
      return;
    }
  }
  self->quit(st.stop_reason);
}

void on_child_down(supervisor_actor* self, child_slot& c,
                   const caf::error& reason) {
  auto& st = self->state;
  c.handle = nullptr;
  if (st.stopping) {
    stop_next(self);
    return;
  }
  if (is_normal_exit(reason)) {
    spdlog::info("supervisor: {} stopped normally", c.spec.name);
    return;
  }
  auto now = self->clock().now();
  if (now - c.started >= st.policy.stable_period)
    c.backoff = st.policy.initial_backoff;
  while (!c.failures.empty() &&
         now - c.failures.front() > st.policy.restart_window)
    c.failures.pop_front();
  c.failures.push_back(now);
  auto text = self->system().render(reason);
  failures_of(c.spec.name).inc();
  if (c.failures.size() > st.policy.max_restarts) {
    spdlog::error("supervisor: {} failed {} times within {} ms ({}); giving up",
                  c.spec.name, c.failures.size(),
                  std::chrono::duration_cast<std::chrono::milliseconds>(
                    st.policy.restart_window)
                    .count(),
                  text);
    st.stopping = true;
    st.stop_reason = reason;
    stop_next(self);
    return;
  }
  spdlog::warn(
    "supervisor: {} failed ({}); restarting in {} ms", c.spec.name, text,
    std::chrono::duration_cast<std::chrono::milliseconds>(c.backoff).count());
  self->delayed_send(self, c.backoff, restart_atom::value, c.spec.name,
                     c.generation);
  c.backoff = std::min(c.backoff * 2, st.policy.max_backoff);
}

caf::behavior supervisor(supervisor_actor* self, supervisor_policy policy,
                         std::vector<child_spec> specs) {
  auto& st = self->state;
  st.policy = policy;
  for (auto& s : specs) {
    child_slot c;
    c.spec = std::move(s);
    c.backoff = policy.initial_backoff;
    st.children.push_back(std::move(c));
  }
  for (auto& c : st.children)
    start_child(self, c);
  self->set_down_handler([=](caf::down_msg& dm) {
    for (auto& c : self->state.children)
      if (c.handle && c.handle.address() == dm.source) {
        on_child_down(self, c, dm.reason);
        return;
      }
  });
  self->set_exit_handler([=](caf::exit_msg& em) {
    auto& st = self->state;
    if (st.stopping)
      return;
    st.stopping = true;
    st.stop_reason = em.reason;
    stop_next(self);
  });
  return {
    [=](restart_atom, const std::string& name, uint64_t generation) {
      auto* c = self->state.find(name);
      // A stale timer (the child was restarted since) is ignored.
      if (!c || c->handle || c->generation != generation ||
          self->state.stopping)
        return;
      c->restarts += 1;
      start_child(self, *c);
    },
    [=](crash_atom, const std::string& name) -> caf::result<bool> {
      auto* c = self->state.find(name);
      if (!c)
        return make_error(errc::unknown_child);
      if (!c->handle)
        return false;
      spdlog::warn("supervisor: killing {} as asked (fault test)", name);
      self->send_exit(c->handle, caf::exit_reason::kill);
      return true;
    },
    [=](stats_atom,
        const std::string& name) -> caf::result<uint64_t, caf::timespan, bool> {
      auto* c = self->state.find(name);
      if (!c)
        return make_error(errc::unknown_child);
      return {c->restarts, c->backoff, static_cast<bool>(c->handle)};
    },
  };
}

} // namespace

caf::actor spawn_supervisor(caf::actor_system& sys, supervisor_policy policy,
                            std::vector<child_spec> children) {
  return sys.spawn(supervisor, std::move(policy), std::move(children));
}

} // namespace outrider::runtime
