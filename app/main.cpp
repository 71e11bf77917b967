// The outrider binary, the composition root: parses options, picks the
// role and runs it. Everything else lives below, in actors/, cluster/ and
// runtime/.
#include <cstdio>

#include "actors/router/router_service.hpp"
#include "actors/sidecar/sidecar_service.hpp"
#include "app/role_all.hpp"
#include "app/settings.hpp"
#include "cluster/grpc_process.hpp"
#include "runtime/app.hpp"
#include "runtime/logging.hpp"

namespace {

using namespace outrider;
namespace opt = runtime::opt;

int run_main(int argc, char** argv) {
  cluster::skip_abseil_deadlock_detection();
  std::vector<std::string> args(argv + 1, argv + argc);
  auto parsed = runtime::parse_options(args, runtime::process_environment());
  switch (parsed.what) {
  case runtime::parse_outcome::help:
    std::fputs(parsed.message.c_str(), stdout);
    return 0;
  case runtime::parse_outcome::version:
    std::puts("outrider 0.1.0");
    return 0;
  case runtime::parse_outcome::error:
    std::fprintf(stderr, "outrider: error: %s\n", parsed.message.c_str());
    return 2;
  case runtime::parse_outcome::ok:
    break;
  }
  for (const auto& w : parsed.warnings)
    std::fprintf(stderr, "outrider: warning: %s\n", w.c_str());
  const auto& opts = parsed.opts;
  const auto& role = opts.get(opt::role);
  // Every setting is read and checked here, before anything listens.
  std::optional<router::router_settings> router_settings;
  if (role != "sidecar") {
    std::string why;
    router_settings = app::router_settings_from(opts, &why);
    if (!router_settings) {
      std::fprintf(stderr, "outrider: error: %s\n", why.c_str());
      return 2;
    }
  }
  // Tracing is every role's.
  if (std::string why; !app::tracing_settings_from(opts, "outrider", &why)) {
    std::fprintf(stderr, "outrider: error: %s\n", why.c_str());
    return 2;
  }
  std::optional<sidecar::sidecar_settings> sidecar_settings;
  if (role == "sidecar") {
    try {
      sidecar_settings = app::sidecar_settings_from(opts);
    } catch (const std::invalid_argument& e) {
      std::fprintf(stderr, "outrider: error: %s\n", e.what());
      return 2;
    }
  }
  if (opts.get(opt::check_config)) {
    std::printf("outrider: configuration ok (role %s)\n%s", role.c_str(),
                runtime::describe_settings(opts).c_str());
    return 0;
  }
  runtime::setup_logging(opts.get(opt::log_level), opts.get(opt::log_format));
  if (role == "router")
    return runtime::run_process(opts, [&](runtime::role_env& env) {
      // The environment's hooks keep the service's parts and stop them.
      auto svc = std::make_shared<router::service>(env, *router_settings);
      // SIGHUP: the same command line, environment and --config file read
      // again and checked whole; what may change live changes.
      env.reload_hooks.push_back([args, svc]() -> std::string {
        auto again =
          runtime::parse_options(args, runtime::process_environment());
        if (again.what != runtime::parse_outcome::ok)
          return again.message;
        std::string why;
        auto next = app::router_settings_from(again.opts, &why);
        if (!next)
          return why;
        svc->reload(*next);
        return {};
      });
      return svc->children();
    });
  if (role == "all")
    return runtime::run_process(opts, [&](runtime::role_env& env) {
      return app::all_children(env, opts, *router_settings);
    });
  return runtime::run_process(opts, [&](runtime::role_env& env) {
    return sidecar::service{env, *sidecar_settings}.children();
  });
}

} // namespace

int main(int argc, char** argv) {
  try {
    return run_main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "outrider: fatal: %s\n", e.what());
    return 1;
  }
}
