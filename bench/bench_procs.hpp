#pragma once

// The processes the benchmarks start: an outrider-sim and a sidecar on free
// loopback ports (their own copies of the binaries' paths).

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/e2e/process.hpp"

namespace outrider::bench {

namespace fs = std::filesystem;

inline std::string outrider_bin = "build/outrider";
inline std::string sim_bin = "build/sim/outrider-sim";

struct sim_proc {
  uint16_t grpc = test::free_port();
  uint16_t pub = test::free_port();
  uint16_t replay = test::free_port();
  std::unique_ptr<test::child_process> proc;
  // `real_time`: the timing model at speed 1 instead of no-sleep.
  explicit sim_proc(bool events, bool real_time = false, int max_seqs = 256) {
    std::vector<std::string> args{sim_bin,
                                  "--grpc-port",
                                  std::to_string(grpc),
                                  "--max-num-seqs",
                                  std::to_string(max_seqs),
                                  "--max-num-batched-tokens",
                                  "65536",
                                  "--block-size",
                                  "16",
                                  "--num-gpu-blocks-override",
                                  "120000"};
    args.push_back(real_time ? "--speedup=1" : "--no-sleep");
    if (events) {
      nlohmann::json kv{
        {"enable_kv_cache_events", true},
        {"publisher", "zmq"},
        {"endpoint", "tcp://*:" + std::to_string(pub)},
        {"replay_endpoint", "tcp://*:" + std::to_string(replay)},
        {"topic", "kv"},
        {"buffer_steps", 200000}};
      args.push_back("--kv-events-config");
      args.push_back(kv.dump());
    }
    proc = std::make_unique<test::child_process>(args);
  }
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(grpc); }
};

struct sidecar_proc {
  fs::path dir;
  uint16_t status = test::free_port();
  uint16_t relay = test::free_port();
  std::unique_ptr<test::child_process> proc;
  std::string worker_id = "bench";
  fs::path discovery;             // default: dir/discovery
  std::vector<std::string> extra; // more flags
  sidecar_proc(const std::string& engine, fs::path d,
               std::string worker = "bench", fs::path shared_discovery = {},
               std::vector<std::string> more = {})
    : dir(std::move(d)), worker_id(std::move(worker)),
      discovery(shared_discovery.empty() ? dir / "discovery"
                                         : std::move(shared_discovery)),
      extra(std::move(more)) {
    start(engine);
  }
  void start(const std::string& engine) {
    std::vector<std::string> args{outrider_bin,
                                  "--role",
                                  "sidecar",
                                  "--engine-endpoint",
                                  engine,
                                  "--system-port",
                                  std::to_string(status),
                                  "--relay-port",
                                  std::to_string(relay),
                                  "--data-dir",
                                  (dir / "data").string(),
                                  "--discovery-dir",
                                  discovery.string(),
                                  "--worker-id",
                                  worker_id,
                                  "--log-level",
                                  "warn"};
    args.insert(args.end(), extra.begin(), extra.end());
    proc = std::make_unique<test::child_process>(args);
  }
  bool ready() const { return test::http_get(status, "/ready") == 200; }
  bool registered() const {
    return fs::exists(discovery / (worker_id + ".json"));
  }
  double metric(const std::string& series) const {
    return test::metric_value(status, series);
  }
};

/// A router on `discovery` (the sidecars' directory), HTTP frontend only.
struct router_proc {
  uint16_t http = test::free_port();
  uint16_t status = test::free_port();
  std::unique_ptr<test::child_process> proc;
  router_proc(const fs::path& discovery, std::vector<std::string> extra = {}) {
    std::vector<std::string> args{outrider_bin,
                                  "--role",
                                  "router",
                                  "--discovery-dir",
                                  discovery.string(),
                                  "--http-port",
                                  std::to_string(http),
                                  "--system-port",
                                  std::to_string(status),
                                  "--grpc-port",
                                  "0",
                                  "--log-level",
                                  "warn"};
    args.insert(args.end(), extra.begin(), extra.end());
    proc = std::make_unique<test::child_process>(args);
  }
  double metric(const std::string& series) const {
    return test::metric_value(status, series);
  }
};

/// A single-process Python grpcio relay of OpenEngine `Inference.Generate`
/// in front of `engine` (bench/python_relay.py: the baseline relay;
/// Debian python3-grpcio).
struct python_relay {
  uint16_t port = test::free_port();
  std::unique_ptr<test::child_process> proc;
  // With `sidecar` (its relay address), Control calls pass through to it
  // (bench/python_relay.py): a router can take this for a worker's relay.
  explicit python_relay(const std::string& engine,
                        const std::string& sidecar = {}) {
    std::vector<std::string> args{"/usr/bin/python3", "bench/python_relay.py",
                                  std::to_string(port), engine};
    if (!sidecar.empty())
      args.push_back(sidecar);
    proc = std::make_unique<test::child_process>(args);
  }
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(port); }
};

/// Whether the Python relay can run here (python3-grpcio installed).
bool have_python_grpc();

/// CPU seconds (user and system) a process has used so far.
double cpu_seconds(pid_t pid);

/// The JSON body of streamed completion `i`: `prompt_len` token ids of its
/// own, `output_len` tokens asked for.
inline std::string stream_body(size_t i, unsigned prompt_len,
                               unsigned output_len) {
  std::string ids;
  for (uint32_t t = 0; t < prompt_len; ++t)
    ids += (t ? "," : "") +
           std::to_string(1 + (static_cast<uint32_t>(i) * 7919 + t) % 31000);
  return "{\"prompt\":[" + ids +
         "],\"max_tokens\":" + std::to_string(output_len) + ",\"stream\":true}";
}

} // namespace outrider::bench
