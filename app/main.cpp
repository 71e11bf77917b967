// The outrider binary, the composition root: parses options, picks the
// role and runs it. Everything else lives below, in actors/, cluster/ and
// runtime/.
#include <cstdio>

#include "actors/router/router_role.hpp"
#include "actors/sidecar/sidecar_role.hpp"
#include "runtime/app.hpp"
#include "runtime/logging.hpp"

namespace {

using namespace outrider;
namespace opt = runtime::opt;

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
  for (const auto& w : parsed.warnings)
    std::fprintf(stderr, "outrider: warning: %s\n", w.c_str());
  const auto& opts = parsed.opts;
  const auto& role = opts.get(opt::role);
  if (role != "sidecar") {
    if (auto why = router::check_router_options(opts); !why.empty()) {
      std::fprintf(stderr, "outrider: error: %s\n", why.c_str());
      return 2;
    }
  }
  if (opts.get(opt::check_config)) {
    std::printf("outrider: configuration ok (role %s)\n%s", role.c_str(),
                runtime::describe_settings(opts).c_str());
    return 0;
  }
  runtime::setup_logging(opts.get(opt::log_level), opts.get(opt::log_format));
  return runtime::run_process(opts, role == "router" ? router::router_children
                                    : role == "all"
                                      ? router::all_children
                                      : sidecar::sidecar_children);
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
