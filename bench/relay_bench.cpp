// Relay cost per token, against two baselines measured in the same run:
// the engine itself (direct) and a single-process Python grpcio relay in
// front of the same engine (bench/python_relay.py; Debian python3-grpcio).
//
// For each number of concurrent streams: tokens/s direct, through
// outrider's sidecar relay and through the Python relay, and each relay's
// CPU time per relayed token (process CPU over tokens). "client us": the
// load generator's own CPU per token in the direct run, the cost of
// reading one gRPC message per token, a floor for any gRPC relay (which
// reads each token once and writes it once). The engine runs in
// no-sleep mode (one token per message, as fast as it can), then at model
// speed. Writes a CSV for bench/plot_relay.py.
//
//   build/bench/relay_bench [build/outrider] [build/sim/outrider-sim] [out.csv]
//                           [no-sleep|model-speed: only that engine mode]
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "bench/bench_procs.hpp"
#include "bench/grpc_load.hpp"
#include "bench/stream_load.hpp"

using namespace outrider;
using namespace outrider::bench;
using namespace std::chrono_literals;

namespace {

constexpr unsigned prompt_len = 128;
constexpr unsigned output_len = 256;

struct measured {
  double tok_s = 0;
  double us_per_token = 0;        // the relay process's CPU
  double client_us_per_token = 0; // this process's: the load generator
};

// `rounds` times `streams` concurrent streams from the asynchronous client
// (bench/grpc_load: gRPC's callback API, no thread per stream, so the load
// generator takes little of the two cores).
measured through(const std::string& endpoint, pid_t relay_pid, int streams,
                 int rounds) {
  auto cpu0 = relay_pid > 0 ? cpu_seconds(relay_pid) : 0;
  auto self0 = cpu_seconds(::getpid());
  auto t0 = std::chrono::steady_clock::now();
  double tokens = 0;
  size_t failed = 0;
  for (int r = 0; r < rounds; ++r)
    for (const auto& s : run_grpc_load(endpoint, static_cast<size_t>(streams),
                                       prompt_len, output_len)) {
      tokens += s.tokens;
      failed += s.ok && s.tokens == output_len ? 0 : 1;
    }
  if (failed > 0)
    std::fprintf(stderr, "%s: %zu streams failed or were short\n",
                 endpoint.c_str(), failed);
  measured m;
  m.tok_s = tokens /
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
              .count();
  if (relay_pid > 0 && tokens > 0)
    m.us_per_token = (cpu_seconds(relay_pid) - cpu0) / tokens * 1e6;
  if (tokens > 0)
    m.client_us_per_token = (cpu_seconds(::getpid()) - self0) / tokens * 1e6;
  return m;
}

int rounds_for(int streams) {
  return streams <= 64 ? 4 : (streams <= 256 ? 2 : 1);
}

} // namespace

int main(int argc, char** argv) {
  if (argc > 1)
    outrider_bin = argv[1];
  if (argc > 2)
    sim_bin = argv[2];
  std::string csv_path = argc > 3 ? argv[3] : "relay_bench.csv";
  auto base = fs::temp_directory_path() /
              ("outrider-relay-bench-" + std::to_string(::getpid()));
  fs::create_directories(base);
  std::ofstream csv{csv_path};
  csv << "engine,streams,direct_tok_s,outrider_tok_s,python_tok_s,"
         "outrider_us_per_token,python_us_per_token\n";
  bool have_python = have_python_grpc();
  if (!have_python)
    std::fprintf(stderr, "no python3-grpcio: the Python column is skipped\n");

  std::string only = argc > 4 ? argv[4] : "";
  for (bool real_time : {false, true}) {
    if ((only == "no-sleep" && real_time) ||
        (only == "model-speed" && !real_time))
      continue;
    sim_proc sim{true, real_time, 1100};
    if (!wait_connected(sim.endpoint()))
      return 1;
    sidecar_proc side{sim.endpoint(), base / (real_time ? "t" : "n")};
    test::eventually([&] { return side.ready(); }, 30s);
    auto relay = "127.0.0.1:" + std::to_string(side.relay);
    std::unique_ptr<python_relay> py;
    if (have_python) {
      py = std::make_unique<python_relay>(sim.endpoint());
      wait_connected(py->endpoint());
    }
    std::printf("\n%s: %u prompt + %u output tokens per stream\n",
                real_time ? "engine at model speed (timing model x1)"
                          : "engine in no-sleep mode",
                prompt_len, output_len);
    std::printf("%7s %11s %11s %11s %8s %8s %11s %11s %8s %11s\n", "streams",
                "direct/s", "outrider/s", "python/s", "o/direct", "p/direct",
                "o us/tok", "p us/tok", "p/o cpu", "client us");
    for (int streams : {64, 256, 1024}) {
      auto rounds = real_time ? 1 : rounds_for(streams);
      auto direct = through(sim.endpoint(), -1, streams, rounds);
      auto ours = through(relay, side.proc->pid(), streams, rounds);
      measured theirs;
      if (py)
        theirs = through(py->endpoint(), py->proc->pid(), streams, rounds);
      std::printf(
        "%7d %11.0f %11.0f %11.0f %8.2f %8.2f %11.1f %11.1f %8.1f %11.1f\n",
        streams, direct.tok_s, ours.tok_s, theirs.tok_s,
        ours.tok_s / direct.tok_s, theirs.tok_s / direct.tok_s,
        ours.us_per_token, theirs.us_per_token,
        ours.us_per_token > 0 ? theirs.us_per_token / ours.us_per_token : 0.0,
        direct.client_us_per_token);
      std::fflush(stdout);
      csv << (real_time ? "model_speed" : "no_sleep") << "," << streams << ","
          << direct.tok_s << "," << ours.tok_s << "," << theirs.tok_s << ","
          << ours.us_per_token << "," << theirs.us_per_token << "\n";
    }
  }
  fs::remove_all(base);
  return 0;
}
