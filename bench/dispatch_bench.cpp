// The router's CPU per token by how it reaches the engine, measured in one
// run against one engine and its sidecar: `--dispatch direct` (the router
// reads the engine's stream itself), `relay` (one gRPC stream per request
// through the sidecar) and `mux` (every request on one multiplexed stream
// to the sidecar, proto/relay_mux.proto). For 64, 256 and 1,024 concurrent
// SSE streams (128 prompt + 128 output tokens each), in no-sleep mode and
// at model speed: tokens/s, the router's and the sidecar's CPU per token
// (user + system over the tokens streamed), and the gRPC messages the
// router read per token where the sidecar counts them.
//
//   build/bench/dispatch_bench [build/outrider] [build/sim/outrider-sim]
//                              [out.csv] [rounds] [modes, e.g. relay,mux]
//                              [streams, e.g. 64,64,64] [engine: no_sleep
//                              or model_speed]
//
// A stream count given several times is measured as many times in a row on
// the same processes (longer samples of one case, or a window for a
// profiler: the CPU figures come from /proc in 10 ms ticks, 1.2 us a token
// at 64 streams of 128 tokens).

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "bench/bench_procs.hpp"
#include "bench/stream_load.hpp"
#include "tests/sse_load.hpp"

using namespace outrider;
using namespace outrider::bench;
using namespace std::chrono_literals;

namespace {

constexpr unsigned prompt_len = 128;
constexpr unsigned output_len = 128;
using clock_type = std::chrono::steady_clock;

std::string body_for(size_t i) {
  return stream_body(i, prompt_len, output_len);
}

struct run_stats {
  double tok_s = 0;
  double tokens = 0;
  size_t failed = 0;
};

run_stats load(uint16_t port, size_t streams) {
  test::sse_load_config cfg;
  cfg.port = port;
  cfg.streams = streams;
  cfg.body = body_for;
  cfg.deadline = 300s;
  auto t0 = clock_type::now();
  auto rs = test::run_sse_load(cfg);
  double secs = std::chrono::duration<double>(clock_type::now() - t0).count();
  run_stats s;
  for (const auto& r : rs) {
    s.failed += r.status != 200 || !r.done || r.error;
    s.tokens += static_cast<double>(r.tokens);
  }
  s.tok_s = s.tokens / secs;
  return s;
}

} // namespace

int main(int argc, char** argv) {
  if (argc > 1)
    outrider_bin = argv[1];
  if (argc > 2)
    sim_bin = argv[2];
  std::string csv_path = argc > 3 ? argv[3] : "dispatch_bench.csv";
  int rounds = argc > 4 ? std::stoi(argv[4]) : 1;
  std::string modes = argc > 5 ? argv[5] : "direct,relay,mux";
  std::vector<size_t> sizes{64, 256, 1024};
  if (argc > 6) {
    sizes.clear();
    std::string list = argv[6];
    for (size_t at = 0; at < list.size();) {
      auto comma = list.find(',', at);
      if (comma == std::string::npos)
        comma = list.size();
      sizes.push_back(std::stoul(list.substr(at, comma - at)));
      at = comma + 1;
    }
  }
  std::string only_engine = argc > 7 ? argv[7] : "";
  test::raise_fd_limit();
  auto base = fs::temp_directory_path() /
              ("outrider-dispatch-bench-" + std::to_string(::getpid()));
  fs::create_directories(base);
  std::ofstream csv{csv_path};
  csv << "engine,round,dispatch,streams,tok_s,router_us_per_token,"
         "sidecar_us_per_token,failed\n";
  for (bool real_time : {false, true}) {
    if (!only_engine.empty() &&
        only_engine != (real_time ? "model_speed" : "no_sleep"))
      continue;
    sim_proc sim{true, real_time, 1100};
    if (!wait_connected(sim.endpoint()))
      return 1;
    auto dir = base / (real_time ? "t" : "n");
    sidecar_proc side{sim.endpoint(), dir};
    test::eventually([&] { return side.ready(); }, 30s);
    const char* engine = real_time ? "model_speed" : "no_sleep";
    std::printf("\n%s: %u prompt + %u output tokens per stream\n%6s %7s %7s "
                "%10s %12s %12s %6s\n",
                engine, prompt_len, output_len, "round", "mode", "streams",
                "tok/s", "router us/t", "sidecar us/t", "fail");
    for (int round = 0; round < rounds; ++round)
      for (const char* mode : {"direct", "relay", "mux"}) {
        if (("," + modes + ",").find(std::string{","} + mode + ",") ==
            std::string::npos)
          continue;
        router_proc router{dir / "discovery", {"--dispatch", mode}};
        test::eventually(
          [&] { return router.metric("outrider_router_workers") >= 1; }, 30s);
        load(router.http, 8); // warm: channels, streams, first placement
        for (size_t streams : sizes) {
          auto r0 = cpu_seconds(router.proc->pid());
          auto s0 = cpu_seconds(side.proc->pid());
          auto r = load(router.http, streams);
          double router_us =
            (cpu_seconds(router.proc->pid()) - r0) / r.tokens * 1e6;
          double side_us =
            (cpu_seconds(side.proc->pid()) - s0) / r.tokens * 1e6;
          std::printf("%6d %7s %7zu %10.0f %12.1f %12.1f %6zu\n", round, mode,
                      streams, r.tok_s, router_us, side_us, r.failed);
          std::fflush(stdout);
          csv << engine << "," << round << "," << mode << "," << streams << ","
              << r.tok_s << "," << router_us << "," << side_us << ","
              << r.failed << "\n";
        }
      }
  }
  fs::remove_all(base);
  return 0;
}
