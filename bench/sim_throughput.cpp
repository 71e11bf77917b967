// Streamed-token throughput of outrider-sim in no-sleep mode at 1, 64 and
// 256 concurrent streams, against a baseline measured in the same run: the
// engine core stepped in process with no RPC at all.
//
//   build/bench/sim_throughput [path/to/outrider-sim]
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/stream_load.hpp"
#include "sim/engine_core.hpp"
#include "tests/e2e/process.hpp"

using namespace outrider;
using clock_type = std::chrono::steady_clock;

namespace {

constexpr uint32_t prompt_len = 128;
constexpr uint32_t max_tokens = 256;

std::vector<uint32_t> prompt_for(int stream, int n) {
  std::vector<uint32_t> p;
  for (uint32_t i = 0; i < prompt_len; ++i)
    p.push_back(1 + (static_cast<uint32_t>(stream * 7919 + n * 104729) + i) %
                      31000);
  return p;
}

// Tokens per second of the bare engine core with `streams` requests at once.
double core_rate(int streams, int rounds) {
  sim::engine_core core{sim::engine_config{}};
  uint64_t tokens = 0;
  auto t0 = clock_type::now();
  for (int r = 0; r < rounds; ++r) {
    for (int s = 0; s < streams; ++s) {
      sim::engine_request req;
      req.id = std::to_string(r) + "/" + std::to_string(s);
      req.prompt = prompt_for(s, r);
      req.max_tokens = max_tokens;
      core.submit(std::move(req));
    }
    for (int i = 0; i < 100000 && !core.idle(); ++i)
      tokens += core.step().outputs.size();
  }
  return static_cast<double>(tokens) /
         std::chrono::duration<double>(clock_type::now() - t0).count();
}

// What the timing model allows at speed-up 1 for `streams` decoding at once
// (one decode step per token, KV use of the reference 16384 x 64 blocks).
double model_rate(int streams) {
  sim::timing_model m;
  double blocks = streams * (prompt_len + max_tokens / 2.0) / 64.0;
  double step_ms = m.decode_ms(blocks / 16384.0);
  return streams * 1000.0 / step_ms;
}

} // namespace

int main(int argc, char** argv) {
  std::string sim_bin = argc > 1 ? argv[1] : "build/sim/outrider-sim";
  auto port = test::free_port();
  test::child_process sim{{sim_bin, "--grpc-port", std::to_string(port),
                           "--no-sleep", "--max-num-seqs", "256"}};
  auto endpoint = "127.0.0.1:" + std::to_string(port);
  if (!bench::wait_connected(endpoint)) {
    std::fprintf(stderr, "outrider-sim did not start\n");
    return 1;
  }
  std::printf("prompt %u tokens, %u output tokens per stream, no-sleep mode\n",
              prompt_len, max_tokens);
  std::printf("%8s %14s %14s %10s %16s %10s\n", "streams", "core tok/s",
              "grpc tok/s", "grpc/core", "model@1x tok/s", "grpc/model");
  for (int streams : {1, 64, 256}) {
    int rounds = streams == 1 ? 20 : (streams == 64 ? 3 : 1);
    double core = core_rate(streams, rounds);
    double rpc = bench::stream_rate(endpoint, bench::api::vllm, streams, rounds,
                                    prompt_len, max_tokens);
    double model = model_rate(streams);
    std::printf("%8d %14.0f %14.0f %10.2f %16.0f %10.1f\n", streams, core, rpc,
                rpc / core, model, rpc / model);
    std::fflush(stdout);
  }
  return 0;
}
