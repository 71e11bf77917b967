// Sidecar benchmarks against outrider-sim, each with a baseline measured in
// the same run:
// 1. relay throughput: streamed tokens/s through the sidecar's relay versus
//    straight to the engine, at 1, 64 and 256 concurrent streams;
// 2. recovery: time from restarting a sidecar killed with SIGKILL, with
//    100,000 blocks indexed, to registered and ready again, versus a cold
//    start against an idle engine.
//
//   build/bench/sidecar_bench [build/outrider] [build/sim/outrider-sim]
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/bench_procs.hpp"
#include "bench/stream_load.hpp"
#include "tests/e2e/process.hpp"

using namespace outrider;
using namespace outrider::bench;
using namespace std::chrono_literals;
namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

namespace {

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

// Time until a (re)started sidecar is ready and registered.
double time_to_ready(sidecar_proc& s, const std::string& engine) {
  auto t0 = clock_type::now();
  s.start(engine);
  test::eventually([&] { return s.ready() && s.registered(); }, 60s);
  return seconds_since(t0);
}

} // namespace

int main(int argc, char** argv) {
  if (argc > 1)
    outrider_bin = argv[1];
  if (argc > 2)
    sim_bin = argv[2];
  auto base = fs::temp_directory_path() /
              ("outrider-sidecar-bench-" + std::to_string(::getpid()));
  fs::create_directories(base);

  sim_proc sim{true};
  if (!bench::wait_connected(sim.endpoint())) {
    std::fprintf(stderr, "outrider-sim did not start\n");
    return 1;
  }
  sidecar_proc side{sim.endpoint(), base / "a"};
  if (!test::eventually([&] { return side.ready(); }, 30s)) {
    std::fprintf(stderr, "the sidecar did not become ready\n");
    return 1;
  }
  auto relay = "127.0.0.1:" + std::to_string(side.relay);

  std::printf("1. relay throughput (OpenEngine streams, 128 prompt + 256 "
              "output tokens, engine in no-sleep mode)\n");
  std::printf("%8s %14s %14s %12s\n", "streams", "direct tok/s", "relay tok/s",
              "relay/direct");
  for (int streams : {1, 64, 256}) {
    int rounds = streams == 1 ? 20 : (streams == 64 ? 3 : 1);
    double direct = bench::stream_rate(sim.endpoint(), bench::api::openengine,
                                       streams, rounds, 128, 256);
    double relayed = bench::stream_rate(relay, bench::api::openengine, streams,
                                        rounds, 128, 256);
    std::printf("%8d %14.0f %14.0f %12.2f\n", streams, direct, relayed,
                relayed / direct);
    std::fflush(stdout);
  }

  {
    // The same through an engine that takes its modelled time (speed 1):
    // what a GPU engine looks like to the relay.
    sim_proc timed{false, true};
    bench::wait_connected(timed.endpoint());
    sidecar_proc tside{timed.endpoint(), base / "t"};
    test::eventually([&] { return tside.ready(); }, 30s);
    auto trelay = "127.0.0.1:" + std::to_string(tside.relay);
    std::printf("\n1b. relay throughput, engine at real speed (timing model "
                "x1; 128 prompt + 128 output tokens)\n");
    std::printf("%8s %14s %14s %12s\n", "streams", "direct tok/s",
                "relay tok/s", "relay/direct");
    for (int streams : {1, 64, 256}) {
      double direct = bench::stream_rate(
        timed.endpoint(), bench::api::openengine, streams, 1, 128, 128);
      double relayed = bench::stream_rate(trelay, bench::api::openengine,
                                          streams, 1, 128, 128);
      std::printf("%8d %14.0f %14.0f %12.2f\n", streams, direct, relayed,
                  relayed / direct);
      std::fflush(stdout);
    }
  }

  // Fill the index: 1,000 distinct prompts of 100 blocks each.
  bench::stream_rate(sim.endpoint(), bench::api::openengine, 16, 63, 1600, 1);
  test::eventually(
    [&] { return side.metric("outrider_index_blocks{rank=\"0\"}") >= 100000; },
    60s);
  double blocks = side.metric("outrider_index_blocks{rank=\"0\"}");

  sim_proc idle{false};
  bench::wait_connected(idle.endpoint());
  sidecar_proc cold{idle.endpoint(), base / "b"};
  cold.proc.reset(); // measured below from the start
  double cold_s = time_to_ready(cold, idle.endpoint());

  side.proc->signal(SIGKILL);
  side.proc->wait(5s);
  double recover_s = time_to_ready(side, sim.endpoint());
  double recovered = side.metric("outrider_index_blocks{rank=\"0\"}");

  std::printf("\n2. recovery after kill -9\n");
  std::printf("%-46s %10s\n", "", "seconds");
  std::printf("%-46s %10.3f\n", "cold start, idle engine (baseline)", cold_s);
  std::printf("restart with %-33.0f %10.3f   (%.2fx baseline)\n", blocks,
              recover_s, recover_s / cold_s);
  std::printf("blocks indexed after recovery: %.0f\n", recovered);
  side.proc.reset();
  cold.proc.reset();
  fs::remove_all(base);
  return 0;
}
