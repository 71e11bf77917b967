// What tracing costs the router: CPU per request with tracing off, and
// with --otlp-endpoint at sampling 0, 0.01 and 1, measured in one run.
//
// One engine in no-sleep mode, its sidecar (spans to the same receiver),
// and four routers on the same discovery directory, one per setting. The
// load (streamed completions, 64 prompt and 16 output tokens, 32 at once)
// goes to each router in turn, round after round, so drift on a shared
// machine falls on every setting alike. The receiver is an OTLP/HTTP
// collector built from the pinned protos (tests/otlp_receiver.hpp). Each
// router's CPU (user + system, from /proc) per request is printed with its
// ratio to tracing off, with the spans each exported.
//
//   build/bench/trace_overhead [build/outrider] [build/sim/outrider-sim]
//                              [requests per round] [rounds]
#include <cstdio>
#include <map>

#include "bench/bench_procs.hpp"
#include "tests/otlp_receiver.hpp"
#include "tests/sse_load.hpp"

using namespace outrider;
using namespace outrider::bench;
using namespace std::chrono_literals;

int main(int argc, char** argv) {
  if (argc > 1)
    outrider_bin = argv[1];
  if (argc > 2)
    sim_bin = argv[2];
  size_t per_round = argc > 3 ? std::stoul(argv[3]) : 2000;
  int rounds = argc > 4 ? std::stoi(argv[4]) : 3;
  test::otlp_receiver rx;
  auto base = fs::temp_directory_path() /
              ("outrider-trace-overhead-" + std::to_string(::getpid()));
  fs::create_directories(base);
  sim_proc sim{false};
  sidecar_proc side{
    sim.endpoint(), base, "bench", {}, {"--otlp-endpoint", rx.url()}};
  if (!test::eventually([&] { return side.ready(); }, 60s)) {
    std::fprintf(stderr, "the sidecar did not turn ready\n");
    return 1;
  }
  struct setting {
    const char* name;
    std::vector<std::string> flags;
  };
  std::vector<setting> settings{
    {"off", {}},
    {"0", {"--otlp-endpoint", rx.url(), "--trace-sample-ratio", "0"}},
    {"0.01", {"--otlp-endpoint", rx.url(), "--trace-sample-ratio", "0.01"}},
    {"1", {"--otlp-endpoint", rx.url(), "--trace-sample-ratio", "1"}}};
  std::vector<std::unique_ptr<router_proc>> routers;
  for (auto& s : settings)
    routers.push_back(std::make_unique<router_proc>(side.discovery, s.flags));
  for (auto& r : routers)
    if (!test::eventually(
          [&] { return r->metric("outrider_router_workers") >= 1; }, 60s)) {
      std::fprintf(stderr, "a router found no worker\n");
      return 1;
    }
  auto load = [](uint16_t port, size_t n) {
    test::sse_load_config cfg;
    cfg.port = port;
    cfg.streams = n;
    cfg.concurrency = 32;
    cfg.deadline = 300s;
    cfg.body = [](size_t i) {
      nlohmann::json prompt = nlohmann::json::array();
      for (uint32_t t = 0; t < 64; ++t)
        prompt.push_back(1000 + (i % 50) * 64 + t);
      return nlohmann::json{
        {"prompt", prompt}, {"max_tokens", 16}, {"stream", true}}
        .dump();
    };
    return test::summarize(test::run_sse_load(cfg));
  };
  for (auto& r : routers)
    load(r->http, 64); // warm: channels, first placements
  std::map<std::string, double> cpu, done;
  size_t failed = 0;
  for (int round = 0; round < rounds; ++round)
    for (size_t k = 0; k < routers.size(); ++k) {
      auto pid = routers[k]->proc->pid();
      auto c0 = cpu_seconds(pid);
      auto s = load(routers[k]->http, per_round);
      cpu[settings[k].name] += cpu_seconds(pid) - c0;
      done[settings[k].name] += static_cast<double>(s.complete);
      failed += s.failed;
    }
  // The last spans leave within the exporter's interval.
  std::this_thread::sleep_for(2s);
  std::printf("tracing overhead: %zu requests x %d rounds per setting, 64 "
              "prompt + 16 output tokens, 32 at once, engine no-sleep\n",
              per_round, rounds);
  std::printf("%-10s %14s %10s %12s\n", "sampling", "CPU us/request", "vs off",
              "spans out");
  double off = cpu["off"] / done["off"] * 1e6;
  for (size_t k = 0; k < routers.size(); ++k) {
    const auto& n = settings[k].name;
    double us = cpu[n] / done[n] * 1e6;
    std::printf("%-10s %14.1f %10.3f %12.0f\n", n, us, us / off,
                routers[k]->metric("outrider_trace_spans_exported_total"));
  }
  std::printf("failed requests: %zu; spans the receiver took: %zu (the "
              "sidecar's included)\n",
              failed, rx.spans().size());
  routers.clear();
  side.proc.reset();
  sim.proc.reset();
  fs::remove_all(base);
  return failed == 0 ? 0 : 1;
}
