// The outrider binary: parses options and runs one role.
#include <cstdio>

#include <spdlog/spdlog.h>

#include "actors/sidecar/lifecycle.hpp"
#include "runtime/app.hpp"
#include "runtime/logging.hpp"

namespace {

using namespace outrider;

std::vector<runtime::child_spec> sidecar_children(runtime::role_context& ctx) {
  sidecar::lifecycle_config cfg;
  cfg.engine_endpoint = ctx.opts.get_string("engine-endpoint");
  cfg.startup_deadline = ctx.opts.get_duration("engine-startup-deadline");
  cfg.health = ctx.health;
  auto control = ctx.control;
  cfg.request_exit = [control](int code, const std::string& why) {
    control->request_exit(code, why);
  };
  return {{"lifecycle", [cfg](caf::actor_system& sys) {
             return caf::actor_cast<caf::actor>(
               sidecar::spawn_lifecycle(sys, cfg));
           }}};
}

} // namespace

int run_main(int argc, char** argv) {
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
  const auto& opts = parsed.opts;
  const auto& role = opts.get_string("role");
  if (role != "sidecar") {
    std::fprintf(stderr,
                 "outrider: error: role '%s' is not available in this build "
                 "yet; only 'sidecar' is\n",
                 role.c_str());
    return 2;
  }
  runtime::setup_logging(opts.get_string("log-level"),
                         opts.get_string("log-format"));
  return runtime::run_process(opts, sidecar_children);
}

int main(int argc, char** argv) {
  try {
    return run_main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "outrider: fatal: %s\n", e.what());
    return 1;
  }
}
