#include "runtime/app.hpp"

#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <optional>
#include <sys/resource.h>
#include <thread>

#include <spdlog/spdlog.h>

#include "runtime/ask.hpp"
#include "runtime/errors.hpp"

namespace outrider::runtime {

namespace {

// An actor that never finishes its shutdown; only for --debug-hang-on-shutdown.
caf::behavior hang_on_shutdown(caf::event_based_actor* self) {
  self->set_exit_handler([](caf::exit_msg&) {
    spdlog::warn("debug: an actor hangs on shutdown as asked");
    std::this_thread::sleep_for(std::chrono::hours{1});
  });
  return {[](caf::ok_atom) {}};
}

// POST /debug/crash?child=NAME: the supervisor kills that child.
void add_crash_route(status_server& status, caf::actor_system& sys,
                     caf::actor sup) {
  spdlog::warn("debug: /debug/crash is enabled; never on a public network");
  status.add_async_route(
    "/debug/crash",
    [&sys, sup](const http_request& req,
                std::function<void(http_response)> respond) {
      http_response r;
      auto at = req.target.find("child=");
      if (req.method != "POST" || at == std::string::npos) {
        r.status = 400;
        r.body = "POST /debug/crash?child=NAME\n";
        respond(std::move(r));
        return;
      }
      auto name = req.target.substr(at + 6);
      name = name.substr(0, name.find('&'));
      ask_async<bool>(
        sys, sup, std::chrono::seconds{2},
        [respond, name](bool running) {
          http_response r;
          r.status = running ? 200 : 409;
          r.body = running ? "killed " + name + "\n" : name + " is down\n";
          respond(std::move(r));
        },
        [respond, &sys](const caf::error& e) {
          http_response r;
          r.status = 404;
          r.body = sys.render(e) + "\n";
          respond(std::move(r));
        },
        crash_atom::value, name);
    },
    /*any_method=*/true);
}

// Every connection is a file descriptor: lift the soft limit (often 1024)
// to the hard one, so that the frontend's --http-max-connections can be met.
void raise_fd_limit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
}

// What the run loop hands to the role's actors.
struct role_parts {
  std::shared_ptr<health_state> health;
  std::shared_ptr<process_control> control;
  status_server& status;
};

} // namespace

void process_control::request_exit(int code, const std::string& reason) {
  std::lock_guard<std::mutex> guard{mtx_};
  int expected = -1;
  if (code_.compare_exchange_strong(expected, code))
    reason_ = reason;
}

std::string process_control::reason() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return reason_;
}

supervisor_policy policy_from(const options& opts) {
  supervisor_policy p;
  p.initial_backoff = opts.get(opt::supervisor_initial_backoff);
  p.max_backoff = opts.get(opt::supervisor_max_backoff);
  p.stable_period = opts.get(opt::supervisor_stable_period);
  p.max_restarts = static_cast<size_t>(opts.get(opt::supervisor_max_restarts));
  p.restart_window = opts.get(opt::supervisor_restart_window);
  return p;
}

namespace {

// Signals are taken synchronously by the main thread; every thread started
// after this inherits the mask.
sigset_t block_signals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP); // a reload, never the end of the process
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  // A file size limit (RLIMIT_FSIZE) is a failed write, handled where it
  // happens (the index's store), not the end of the process.
  std::signal(SIGXFSZ, SIG_IGN);
  return signals;
}

caf::actor_system_config actor_system_config_from(const options& opts) {
  caf::actor_system_config cfg;
  auto threads = opts.get(opt::scheduler_threads);
  if (threads == 0)
    threads = std::max(2u, std::thread::hardware_concurrency());
  cfg.set("scheduler.max-threads", static_cast<size_t>(threads));
  // An idle CAF worker first polls, then (by default) sleeps 50 us between
  // 500 more polls before it waits on its condition variable: 20,000
  // wake-ups a second per worker whenever a message came by recently, which
  // profiling found to be most of an idle sidecar's CPU. A worker now polls
  // briefly and then waits, woken at once by the next job (CAF notifies a
  // sleeping worker on enqueue).
  cfg.set("work-stealing.aggressive-poll-attempts", size_t{20});
  cfg.set("work-stealing.moderate-poll-attempts", size_t{0});
  cfg.set("logger.verbosity", caf::atom("quiet"));
  add_error_category(cfg);
  return cfg;
}

// SIGHUP: the role's reload hooks, counted by outcome, one line each.
void reload(const std::vector<std::function<std::string()>>& hooks) {
  static auto& applied = global_metrics().get_counter(
    "outrider_config_reloads_total",
    "SIGHUP reloads of --config: applied, or refused (the file or a value "
    "in it is bad; nothing changed)",
    {{"outcome", "applied"}});
  static auto& refused = global_metrics().get_counter(
    "outrider_config_reloads_total",
    "SIGHUP reloads of --config: applied, or refused (the file or a value "
    "in it is bad; nothing changed)",
    {{"outcome", "refused"}});
  if (hooks.empty()) {
    spdlog::info("SIGHUP: this role changes nothing live (certificates "
                 "reload on their own, --tls-reload-interval)");
    return;
  }
  for (const auto& hook : hooks) {
    std::string why;
    try {
      why = hook();
    } catch (const std::exception& e) {
      why = e.what();
    }
    if (why.empty()) {
      applied.inc();
    } else {
      refused.inc();
      spdlog::error("SIGHUP: reload refused, nothing changed: {}", why);
    }
  }
}

// Waits for a signal or an exit request; 200 ms granularity.
void wait_for_exit(const sigset_t& signals, process_control& control,
                   const std::vector<std::function<std::string()>>& hooks) {
  timespec tick{0, 200'000'000};
  while (control.exit_code() < 0) {
    int sig = sigtimedwait(&signals, nullptr, &tick);
    if (sig == SIGHUP)
      reload(hooks);
    if (sig == SIGTERM || sig == SIGINT) {
      spdlog::info("received {}; shutting down",
                   sig == SIGTERM ? "SIGTERM" : "SIGINT");
      control.request_exit(0, "signal");
    }
  }
}

// Runs `stop` with a watchdog that ends the process with `code` when it
// does not finish within `timeout` (actors that hang).
void bounded(std::chrono::milliseconds timeout, int code,
             const std::function<void()>& stop) {
  std::mutex mtx;
  std::condition_variable cv;
  bool done = false;
  std::thread watchdog([&] {
    std::unique_lock<std::mutex> guard{mtx};
    if (!cv.wait_for(guard, timeout, [&] { return done; })) {
      spdlog::error("shutdown did not finish within {} ms; exiting anyway",
                    timeout.count());
      spdlog::default_logger()->flush();
      std::_Exit(code);
    }
  });
  stop();
  {
    std::lock_guard<std::mutex> guard{mtx};
    done = true;
  }
  cv.notify_all();
  watchdog.join();
}

// The actor system and the role's actors under the root supervisor, until
// the process is asked to exit; returns the exit code.
int run_actors(const options& opts, const role_builder& build,
               const sigset_t& signals, role_parts parts) {
  auto cfg = actor_system_config_from(opts);
  // Destroyed under the shutdown watchdog too: its destructor waits for
  // every thread that still holds it (see spawn_anywhere).
  std::optional<caf::actor_system> system{std::in_place, cfg};
  auto& sys = *system;
  std::vector<std::function<void()>> stop_hooks;
  std::vector<std::function<void()>> pre_stop_hooks;
  std::vector<std::function<std::string()>> reload_hooks;
  role_env ctx{sys,        parts.health,   parts.control, parts.status,
               stop_hooks, pre_stop_hooks, reload_hooks};
  auto children = build(ctx);
  if (opts.get(opt::debug_hang_on_shutdown))
    children.push_back({"debug-hang", [](caf::actor_system& s) {
                          return s.spawn(hang_on_shutdown);
                        }});
  auto sup = spawn_supervisor(sys, policy_from(opts), std::move(children));
  if (opts.get(opt::debug_crash_endpoint))
    add_crash_route(parts.status, sys, sup);
  auto control = parts.control;
  sup->attach_functor([control](const caf::error& reason) {
    if (!is_normal_exit(reason))
      control->request_exit(1, "supervisor gave up");
  });
  wait_for_exit(signals, *control, reload_hooks);
  auto code = control->exit_code();
  parts.health->begin_shutdown();
  if (code != 0)
    spdlog::error("exiting: {}", control->reason());
  bounded(opts.get(opt::shutdown_timeout), code, [&] {
    for (auto& hook : pre_stop_hooks)
      hook();
    caf::anon_send_exit(sup, caf::exit_reason::user_shutdown);
    sys.await_all_actors_done();
    for (auto i = stop_hooks.rbegin(); i != stop_hooks.rend(); ++i)
      (*i)();
    // A thread that used a scoped actor (the debug routes' worker) must be
    // gone before the actor system is destroyed, or its destructor waits
    // for ever (GET /debug/index, then SIGTERM: the sidecar never exited).
    parts.status.stop_added_routes();
    // What the hooks and the supervisor hold goes before the system, as it
    // would at the end of this scope.
    pre_stop_hooks.clear();
    stop_hooks.clear();
    reload_hooks.clear();
    children.clear();
    sup = nullptr;
    system.reset();
  });
  return code;
}

} // namespace

int run_process(const options& opts, const role_builder& build) {
  auto signals = block_signals();
  const auto& role = opts.get(opt::role);
  auto health = std::make_shared<health_state>(role);
  auto control = std::make_shared<process_control>();
  status_server status{health, global_metrics()};
  auto host = opts.get(opt::system_host);
  raise_fd_limit();
  if (auto err =
        status.start(host, static_cast<uint16_t>(opts.get(opt::system_port)))) {
    spdlog::error("status server: {}", describe(err));
    return 1;
  }
  spdlog::info("outrider {} starting; status server on {}:{}", role, host,
               status.port());
  global_metrics()
    .get_gauge("outrider_build_info", "Version and role of this process",
               {{"version", "0.1.0"}, {"role", role}})
    .set(1);
  auto code = run_actors(opts, build, signals, {health, control, status});
  status.stop();
  spdlog::info("outrider {} stopped", role);
  return code;
}

} // namespace outrider::runtime
