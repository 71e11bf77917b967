// The router under many concurrent streams: no thread per request, memory
// bounded, every stream complete. The 10,000-stream run is in
// bench/router_bench (docs/performance.md); this one fits CI.

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <sys/resource.h>
#include <thread>

#include "tests/e2e/router_cluster.hpp"
#include "tests/sse_load.hpp"

using namespace outrider::test;
using json = nlohmann::json;

namespace {

// The peak of a /proc/PID/status field while `fn` runs (sampled).
template <class Fn>
long peak_while(pid_t pid, const std::string& field, Fn fn) {
  std::atomic<bool> running{true};
  std::atomic<long> peak{proc_status(pid, field)};
  std::thread sampler{[&] {
    while (running.load()) {
      auto v = proc_status(pid, field);
      if (v > peak.load())
        peak = v;
      std::this_thread::sleep_for(std::chrono::milliseconds{20});
    }
  }};
  fn();
  running = false;
  sampler.join();
  return peak.load();
}

} // namespace

TEST_CASE("1500 concurrent SSE streams through one router on a bounded "
          "number of threads") {
  raise_fd_limit();
  sim_process::options so;
  so.extra = {
    "--speedup", "20", "--max-num-seqs", "2048", "--num-gpu-blocks-override",
    "40000"};
  cluster c{2, so};
  // One request first: the router knows its workers and has its channels.
  REQUIRE(c.complete(tokens(1, 8), 2)["choices"].size() == 1);
  auto pid = c.router->pid();
  auto threads_before = proc_status(pid, "Threads");
  sse_load_config cfg;
  cfg.port = c.http_port;
  cfg.streams = 1500;
  cfg.deadline = std::chrono::seconds{90};
  cfg.body = [](size_t i) {
    auto first = static_cast<uint32_t>(1 + 64 * (i % 200));
    return json{
      {"prompt", tokens(first, 32)}, {"max_tokens", 24}, {"stream", true}}
      .dump();
  };
  std::vector<sse_stream_result> results;
  auto peak_threads =
    peak_while(pid, "Threads", [&] { results = run_sse_load(cfg); });
  auto s = summarize(results);
  auto rss_mb = proc_status(pid, "VmRSS") / 1024;
  WARN("1,500 concurrent SSE streams: "
       << s.complete << " complete, " << s.failed << " failed, " << s.events
       << " events; router threads " << threads_before << " -> peak "
       << peak_threads << ", RSS " << rss_mb << " MB");
  CHECK(s.complete == 1500);
  CHECK(s.events >= 1500); // tokens may be merged, never lost
  // A thread per request would be 1,500 more.
  CHECK(peak_threads <= threads_before + 16);
  CHECK(rss_mb < rss_bound_mb(400));
  // Nothing left behind: the router carries no request once all are done.
  CHECK(eventually(
    [&] { return c.router_metric("outrider_router_requests_in_flight") == 0; },
    5s));
}

namespace {

// A process's threads: all of them, and those of gRPC core's own pools
// (executor, global timers, event engine), which size themselves to the
// machine's cores under load, whatever the number of peers.
struct thread_census {
  long total = 0, grpc_pools = 0;
  std::map<std::string, long> by_name; // to say which pool grew
};

std::string names(const thread_census& c) {
  std::string out;
  for (const auto& [name, n] : c.by_name)
    out += name + " " + std::to_string(n) + ", ";
  return out;
}

thread_census census(pid_t pid) {
  thread_census out;
  auto dir = "/proc/" + std::to_string(pid) + "/task";
  for (const auto& t : std::filesystem::directory_iterator{dir}) {
    std::ifstream comm{t.path() / "comm"};
    std::string name;
    std::getline(comm, name);
    ++out.total;
    ++out.by_name[name];
    for (const char* pool : {"default-executo", "grpc_global_tim",
                             "event_engine", "resolver-execut"})
      if (name == pool)
        ++out.grpc_pools;
  }
  return out;
}

// The router's threads once it knows `workers` workers (their sidecars
// real), has their KV events and has carried a burst of 64 streams.
thread_census router_threads_with(int workers) {
  cluster c{workers};
  // The cluster waits 10 s for the router to know its workers; 16 sidecars
  // beside another test on 2 cores can take longer.
  REQUIRE(eventually(
    [&] { return c.router_metric("outrider_router_workers") == workers; },
    30s));
  sse_load_config cfg;
  cfg.port = c.http_port;
  cfg.streams = 64;
  cfg.body = [](size_t i) {
    auto first = static_cast<uint32_t>(1 + 64 * i);
    return json{
      {"prompt", tokens(first, 16)}, {"max_tokens", 4}, {"stream", true}}
      .dump();
  };
  auto s = summarize(run_sse_load(cfg));
  CHECK(s.complete == 64);
  // The prompts' blocks reached the index through the subscriptions.
  CHECK(eventually(
    [&] { return c.router_metric("outrider_router_index_entries") >= workers; },
    10s));
  return census(c.router->pid());
}

} // namespace

TEST_CASE("the router's thread count does not grow with its workers: 2 and "
          "16 workers, their sidecars real",
          "[alone]") {
  auto two = router_threads_with(2);
  auto sixteen = router_threads_with(16);
  WARN("router threads: " << two.total << " with 2 workers (" << two.grpc_pools
                          << " in gRPC's pools), " << sixteen.total
                          << " with 16 (" << sixteen.grpc_pools
                          << "); by name: " << names(two) << "and "
                          << names(sixteen));
  // outrider's own threads (actors, discovery, frontends, gRPC's callback
  // threads): the same within 2.
  auto own = [](const thread_census& c) { return c.total - c.grpc_pools; };
  CHECK(own(sixteen) <= own(two) + 2);
  CHECK(own(sixteen) >= own(two) - 2);
  // gRPC's executor may reach 2 threads a core while 16 channels connect
  // at once (its cap in gRPC 1.51), its timer and event-engine pools a few
  // more; bounded by the machine, not by the workers.
  auto cores = static_cast<long>(std::thread::hardware_concurrency());
  CHECK(sixteen.grpc_pools <= 4 * cores + 4);
}
