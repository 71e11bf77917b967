// The router's HTTP/SSE path against the same load straight to the
// engine's gRPC, measured in one run; then many concurrent SSE streams
// through one router.
//
// Part 1: one engine, its sidecar, a router with --dispatch direct (so the
// difference is the router alone). For 64, 256 and 1,024 concurrent
// streams: tokens/s straight to the engine (OpenEngine gRPC, asynchronous
// client) and through the router (HTTP/SSE, asynchronous client), the
// router's CPU per token, and the time to the first token and between
// tokens on both paths (p50, p99) with the router's addition. The engine
// runs in no-sleep mode, then at model speed.
//
// Part 2: `huge` (default 10,000) concurrent SSE streams through one
// router in front of four engines at model speed and their sidecars (relay
// dispatch): how many complete, the router's threads and RSS (peak).
//
// Part 3 (only when asked), the soak: 1,000 concurrent streams for 10
// minutes, the router's RSS, threads and descriptors every 10 s.
//
//   build/bench/router_bench [build/outrider] [build/sim/outrider-sim]
//                            [out.csv] [huge streams] [part1|part2]
//   build/bench/router_bench build/outrider build/sim/outrider-sim x.csv
//                            1000 soak 600
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/resource.h>
#include <thread>

#include "bench/bench_procs.hpp"
#include "bench/grpc_load.hpp"
#include "bench/stream_load.hpp"
#include "tests/sse_load.hpp"

using namespace outrider;
using namespace outrider::bench;
using namespace std::chrono_literals;

namespace {

constexpr unsigned prompt_len = 128;
constexpr unsigned output_len = 128;
using clock_type = std::chrono::steady_clock;

double pct(std::vector<double> v, double q) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1))];
}

struct path_stats {
  double tok_s = 0;
  size_t failed = 0;
  std::string failures; // the first few, described
  std::vector<double> ttft, gaps;
};

path_stats direct(const std::string& endpoint, size_t streams) {
  auto t0 = clock_type::now();
  auto rs = run_grpc_load(endpoint, streams, prompt_len, output_len);
  double secs = std::chrono::duration<double>(clock_type::now() - t0).count();
  path_stats s;
  uint64_t tokens = 0;
  for (auto& r : rs) {
    s.failed += !r.ok || r.tokens != output_len;
    tokens += r.tokens;
    s.ttft.push_back(r.ttft_s);
    s.gaps.insert(s.gaps.end(), r.gaps_s.begin(), r.gaps_s.end());
  }
  s.tok_s = static_cast<double>(tokens) / secs;
  return s;
}

std::string body_for(size_t i) {
  return stream_body(i, prompt_len, output_len);
}

path_stats through_router(uint16_t port, size_t streams, bool gaps,
                          std::chrono::seconds deadline = 300s) {
  test::sse_load_config cfg;
  cfg.port = port;
  cfg.streams = streams;
  cfg.body = body_for;
  cfg.record_gaps = gaps;
  cfg.deadline = deadline;
  auto t0 = clock_type::now();
  auto rs = test::run_sse_load(cfg);
  double secs = std::chrono::duration<double>(clock_type::now() - t0).count();
  path_stats s;
  uint64_t tokens = 0;
  for (auto& r : rs) {
    bool bad = r.status != 200 || !r.done || r.error;
    if (bad && s.failed < 5)
      s.failures += " [status " + std::to_string(r.status) + ", " +
                    std::to_string(r.events) + " events, " +
                    (r.done ? "done" : "no [DONE]") +
                    (r.error ? ", error " + r.broken : "") + ": " +
                    r.last_line + "]";
    s.failed += bad;
    tokens += r.tokens;
    s.ttft.push_back(r.ttft_s);
    s.gaps.insert(s.gaps.end(), r.gaps_s.begin(), r.gaps_s.end());
  }
  s.tok_s = static_cast<double>(tokens) / secs;
  return s;
}

void part1(const fs::path& base, std::ofstream& csv) {
  for (bool real_time : {false, true}) {
    sim_proc sim{true, real_time, 1100};
    if (!wait_connected(sim.endpoint()))
      return;
    auto dir = base / (real_time ? "t" : "n");
    sidecar_proc side{sim.endpoint(), dir};
    test::eventually([&] { return side.ready(); }, 30s);
    router_proc router{dir / "discovery", {"--dispatch", "direct"}};
    test::eventually(
      [&] { return router.metric("outrider_router_workers") >= 1; }, 30s);
    through_router(router.http, 8, false); // warm: channels, first placement
    std::printf("\n%s: %u prompt + %u output tokens per stream\n",
                real_time ? "engine at model speed (timing model x1)"
                          : "engine in no-sleep mode",
                prompt_len, output_len);
    std::printf("%7s %10s %10s %6s %8s %9s %9s %9s %9s %9s %6s\n", "streams",
                "direct/s", "router/s", "r/d", "us/tok", "itl50 d", "itl50 r",
                "+itl50", "+itl99", "+ttft50", "fail");
    for (size_t streams : {64, 256, 1024}) {
      auto d = direct(sim.endpoint(), streams);
      auto cpu0 = cpu_seconds(router.proc->pid());
      auto r = through_router(router.http, streams, true);
      double tokens = static_cast<double>(streams) * output_len;
      double us = (cpu_seconds(router.proc->pid()) - cpu0) / tokens * 1e6;
      double itl50d = pct(d.gaps, 0.5) * 1e6, itl50r = pct(r.gaps, 0.5) * 1e6;
      double add99 = (pct(r.gaps, 0.99) - pct(d.gaps, 0.99)) * 1e6;
      double ttft = (pct(r.ttft, 0.5) - pct(d.ttft, 0.5)) * 1e6;
      std::printf("%7zu %10.0f %10.0f %6.2f %8.1f %9.0f %9.0f %9.0f %9.0f "
                  "%9.0f %6zu\n",
                  streams, d.tok_s, r.tok_s, r.tok_s / d.tok_s, us, itl50d,
                  itl50r, itl50r - itl50d, add99, ttft, d.failed + r.failed);
      std::fflush(stdout);
      csv << (real_time ? "model_speed" : "no_sleep") << "," << streams << ","
          << d.tok_s << "," << r.tok_s << "," << us << "," << itl50d << ","
          << itl50r << "," << pct(d.gaps, 0.99) * 1e6 << ","
          << pct(r.gaps, 0.99) * 1e6 << "," << pct(d.ttft, 0.5) * 1e6 << ","
          << pct(r.ttft, 0.5) * 1e6 << "\n";
    }
  }
}

void part2(const fs::path& base, size_t huge) {
  std::vector<std::unique_ptr<sim_proc>> sims;
  std::vector<std::unique_ptr<sidecar_proc>> sides;
  auto discovery = base / "many";
  for (int i = 0; i < 4; ++i) {
    sims.push_back(std::make_unique<sim_proc>(true, true, 4096));
    if (!wait_connected(sims.back()->endpoint()))
      return;
    fs::create_directories(base / ("w" + std::to_string(i)));
    sides.push_back(std::make_unique<sidecar_proc>(
      sims.back()->endpoint(), base / ("w" + std::to_string(i)),
      "w" + std::to_string(i), discovery));
  }
  for (auto& s : sides)
    test::eventually([&] { return s->ready(); }, 30s);
  router_proc router{discovery};
  test::eventually(
    [&] { return router.metric("outrider_router_workers") >= 4; }, 30s);
  through_router(router.http, 8, false);
  auto pid = router.proc->pid();
  auto threads0 = test::proc_status(pid, "Threads");
  std::atomic<bool> running{true};
  std::atomic<long> peak_threads{threads0}, peak_rss{0};
  std::thread sampler{[&] {
    while (running.load()) {
      peak_threads =
        std::max(peak_threads.load(), test::proc_status(pid, "Threads"));
      peak_rss = std::max(peak_rss.load(), test::proc_status(pid, "VmRSS"));
      std::this_thread::sleep_for(50ms);
    }
  }};
  auto t0 = clock_type::now();
  auto r = through_router(router.http, huge, false, 600s);
  double secs = std::chrono::duration<double>(clock_type::now() - t0).count();
  running = false;
  sampler.join();
  std::printf("\n%zu concurrent SSE streams (%u + %u tokens each) through one "
              "router, 4 engines at model speed:\n  %zu complete, %zu failed "
              "in %.1f s (%.0f tokens/s); router threads %ld -> peak %ld, "
              "RSS peak %ld MB; TTFT p50 %.0f ms p99 %.0f ms\n",
              huge, prompt_len, output_len, huge - r.failed, r.failed, secs,
              r.tok_s, threads0, peak_threads.load(), peak_rss.load() / 1024,
              pct(r.ttft, 0.5) * 1e3, pct(r.ttft, 0.99) * 1e3);
  if (r.failed > 0) {
    std::printf("  failures:%s\n  the router's refusals:\n",
                r.failures.c_str());
    std::string text;
    test::http_get(router.status, "/metrics", &text);
    std::istringstream lines{text};
    for (std::string l; std::getline(lines, l);)
      if (l.rfind("outrider_http_refused_total", 0) == 0 && l.back() != '0')
        std::printf("    %s\n", l.c_str());
  }
}

size_t open_fds(pid_t pid) {
  std::error_code ec;
  size_t n = 0;
  for (auto it =
         fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
       !ec && it != fs::directory_iterator(); it.increment(ec))
    ++n;
  return n;
}

// Part 3, the soak: `streams` concurrent SSE streams (a new one as soon as
// one ends) for `seconds`, faults off; the router's RSS, threads and file
// descriptors sampled every 10 s.
void soak(const fs::path& base, size_t streams, int seconds) {
  std::vector<std::unique_ptr<sim_proc>> sims;
  std::vector<std::unique_ptr<sidecar_proc>> sides;
  auto discovery = base / "soak";
  fs::create_directories(discovery);
  for (int i = 0; i < 2; ++i) {
    sims.push_back(std::make_unique<sim_proc>(true, true, 2048));
    if (!wait_connected(sims.back()->endpoint()))
      return;
    fs::create_directories(base / ("s" + std::to_string(i)));
    sides.push_back(std::make_unique<sidecar_proc>(
      sims.back()->endpoint(), base / ("s" + std::to_string(i)),
      "s" + std::to_string(i), discovery));
  }
  for (auto& s : sides)
    test::eventually([&] { return s->ready(); }, 30s);
  router_proc router{discovery};
  test::eventually(
    [&] { return router.metric("outrider_router_workers") >= 2; }, 30s);
  auto pid = router.proc->pid();
  std::atomic<bool> running{true};
  std::printf("\nsoak: %zu concurrent SSE streams for %d s (2 engines at "
              "model speed, relay dispatch)\n%8s %8s %8s %8s\n",
              streams, seconds, "t (s)", "RSS MB", "threads", "fds");
  std::thread sampler{[&] {
    auto t0 = clock_type::now();
    while (running.load()) {
      std::printf("%8.0f %8ld %8ld %8zu\n",
                  std::chrono::duration<double>(clock_type::now() - t0).count(),
                  test::proc_status(pid, "VmRSS") / 1024,
                  test::proc_status(pid, "Threads"), open_fds(pid));
      std::fflush(stdout);
      for (int i = 0; i < 100 && running.load(); ++i)
        std::this_thread::sleep_for(100ms);
    }
  }};
  test::sse_load_config cfg;
  cfg.port = router.http;
  cfg.streams = 2'000'000;
  cfg.concurrency = streams;
  cfg.launch_for = std::chrono::seconds{seconds};
  cfg.deadline = std::chrono::seconds{seconds + 120};
  cfg.body = [](size_t i) {
    std::string ids;
    for (uint32_t t = 0; t < 64; ++t)
      ids += (t ? "," : "") +
             std::to_string(1 + (static_cast<uint32_t>(i % 5000) * 7919 + t) %
                                  31000);
    return "{\"prompt\":[" + ids + "],\"max_tokens\":32,\"stream\":true}";
  };
  auto rs = test::run_sse_load(cfg);
  running = false;
  sampler.join();
  auto sum = test::summarize(rs);
  std::printf("soak: %zu streams, %zu complete, %zu failed; router after: RSS "
              "%ld MB, %ld threads, %zu fds\n",
              rs.size(), sum.complete, sum.failed,
              test::proc_status(pid, "VmRSS") / 1024,
              test::proc_status(pid, "Threads"), open_fds(pid));
}

} // namespace

int main(int argc, char** argv) {
  if (argc > 1)
    outrider_bin = argv[1];
  if (argc > 2)
    sim_bin = argv[2];
  std::string csv_path = argc > 3 ? argv[3] : "router_bench.csv";
  size_t huge = argc > 4 ? std::stoul(argv[4]) : 10000;
  std::string only = argc > 5 ? argv[5] : "";
  test::raise_fd_limit();
  auto base = fs::temp_directory_path() /
              ("outrider-router-bench-" + std::to_string(::getpid()));
  fs::create_directories(base);
  std::ofstream csv{csv_path};
  csv << "engine,streams,direct_tok_s,router_tok_s,router_us_per_token,"
         "itl_p50_direct_us,itl_p50_router_us,itl_p99_direct_us,"
         "itl_p99_router_us,ttft_p50_direct_us,ttft_p50_router_us\n";
  if (only == "soak") {
    // huge = concurrent streams; the soak's length from argv[6].
    soak(base, huge, argc > 6 ? std::stoi(argv[6]) : 600);
    fs::remove_all(base);
    return 0;
  }
  if (only != "part2")
    part1(base, csv);
  if (only != "part1")
    part2(base, huge);
  fs::remove_all(base);
  return 0;
}
