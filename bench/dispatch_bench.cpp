// The router's CPU per token by how it reaches the engine, measured in one
// run against one engine and its sidecar: `--dispatch direct` (the router
// reads the engine's stream itself), `relay` (one gRPC stream per request
// through the sidecar), `mux` (every request on one multiplexed stream to
// the sidecar, proto/relay_mux.proto) and `python` (the router's `relay`
// dispatch through bench/python_relay.py instead of the sidecar: a record
// naming the Python relay as the worker's relay, the baseline relay;
// Debian python3-grpcio). For 64, 256 and 1,024 concurrent SSE streams
// (128 prompt + 128 output tokens each), in no-sleep mode and at model
// speed: tokens/s, and the CPU per token (user + system over the tokens
// streamed) of the router and of the relay process on the path (the
// sidecar; the Python relay in `python` mode; with `direct`, the sidecar
// beside the path).
//
//   build/bench/dispatch_bench [build/outrider] [build/sim/outrider-sim]
//                              [out.csv] [rounds]
//                              [modes, e.g. direct,relay,mux,python]
//                              [streams, e.g. 64,64,64] [engine: no_sleep
//                              or model_speed]
//
// A stream count given several times is measured as many times in a row on
// the same processes (longer samples of one case, or a window for a
// profiler: the CPU figures come from /proc in 10 ms ticks, 1.2 us a token
// at 64 streams of 128 tokens).

#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

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

// The sidecar's record with the Python relay as the worker's relay, in a
// directory of its own, its lease (the file's mtime) renewed every 500 ms
// as a sidecar renews its own: the router's `relay` dispatch then goes
// through the Python relay to the same engine.
class python_record {
 public:
  python_record(const sidecar_proc& side, const fs::path& dir,
                const std::string& relay)
    : dir_(dir / "python-discovery"), path_(dir_ / (side.worker_id + ".json")) {
    std::ifstream in{side.discovery / (side.worker_id + ".json")};
    auto record = nlohmann::json::parse(in);
    record["relay_endpoint"] = relay;
    fs::create_directories(dir_);
    std::ofstream{path_} << record.dump();
    renew_ = std::thread{[this] {
      std::unique_lock<std::mutex> lock{mtx_};
      while (!cv_.wait_for(lock, 500ms, [this] { return stop_; })) {
        std::error_code ec;
        fs::last_write_time(path_, fs::file_time_type::clock::now(), ec);
      }
    }};
  }
  ~python_record() {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      stop_ = true;
    }
    cv_.notify_all();
    renew_.join();
  }
  const fs::path& dir() const { return dir_; }

 private:
  fs::path dir_, path_;
  std::mutex mtx_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread renew_;
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
         "relay_us_per_token,failed\n";
  bool python = ("," + modes + ",").find(",python,") != std::string::npos;
  if (python && !have_python_grpc()) {
    std::fprintf(stderr, "no python3-grpcio: the python mode is skipped\n");
    python = false;
  }
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
    test::eventually([&] { return side.registered(); }, 30s);
    std::unique_ptr<python_relay> py;
    std::unique_ptr<python_record> py_record;
    if (python) {
      py = std::make_unique<python_relay>(
        sim.endpoint(), "127.0.0.1:" + std::to_string(side.relay));
      if (!wait_connected(py->endpoint()))
        return 1;
      py_record = std::make_unique<python_record>(side, dir, py->endpoint());
    }
    const char* engine = real_time ? "model_speed" : "no_sleep";
    std::printf("\n%s: %u prompt + %u output tokens per stream\n%6s %7s %7s "
                "%10s %12s %12s %6s\n",
                engine, prompt_len, output_len, "round", "mode", "streams",
                "tok/s", "router us/t", "relay us/t", "fail");
    for (int round = 0; round < rounds; ++round)
      for (const char* mode : {"direct", "relay", "mux", "python"}) {
        bool is_python = std::string{mode} == "python";
        if (("," + modes + ",").find(std::string{","} + mode + ",") ==
              std::string::npos ||
            (is_python && !py))
          continue;
        router_proc router{is_python ? py_record->dir() : dir / "discovery",
                           {"--dispatch", is_python ? "relay" : mode}};
        auto relay_pid = is_python ? py->proc->pid() : side.proc->pid();
        test::eventually(
          [&] { return router.metric("outrider_router_workers") >= 1; }, 30s);
        load(router.http, 8); // warm: channels, streams, first placement
        for (size_t streams : sizes) {
          auto r0 = cpu_seconds(router.proc->pid());
          auto s0 = cpu_seconds(relay_pid);
          auto r = load(router.http, streams);
          double router_us =
            (cpu_seconds(router.proc->pid()) - r0) / r.tokens * 1e6;
          double relay_us = (cpu_seconds(relay_pid) - s0) / r.tokens * 1e6;
          std::printf("%6d %7s %7zu %10.0f %12.1f %12.1f %6zu\n", round, mode,
                      streams, r.tok_s, router_us, relay_us, r.failed);
          std::fflush(stdout);
          csv << engine << "," << round << "," << mode << "," << streams << ","
              << r.tok_s << "," << router_us << "," << relay_us << ","
              << r.failed << "\n";
        }
      }
  }
  fs::remove_all(base);
  return 0;
}
