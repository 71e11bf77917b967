#include "actors/router/demo_workload.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <set>
#include <thread>

namespace outrider::router {

namespace {

using clock_type = std::chrono::steady_clock;

double pct(std::vector<double> v, double p) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * static_cast<double>(v.size() - 1))];
}

} // namespace

std::string run_demo_workload(dispatcher& d, const workload_config& cfg) {
  std::mutex mtx;
  std::vector<double> ttft, latency;
  uint64_t prompt_tokens = 0, cached = 0, out_tokens = 0, ideal = 0;
  int ok = 0, failed = 0, migrations = 0;
  std::set<int> seen_groups;
  std::atomic<int> next{0};
  auto t0 = clock_type::now();
  std::vector<std::thread> threads;
  for (int w = 0; w < cfg.concurrency; ++w)
    threads.emplace_back([&] {
      for (int i = next++; i < cfg.requests; i = next++) {
        // Groups in a scrambled order: no alignment with round-robin.
        int group = static_cast<int>(
          (static_cast<uint64_t>(i) * 2654435761u >> 7) % cfg.groups);
        generate_params p;
        for (uint32_t t = 0; t < cfg.prefix_tokens; ++t)
          p.prompt.push_back(1 +
                             (static_cast<uint32_t>(group) * 7919 + t) % 31000);
        for (uint32_t t = 0; t < cfg.unique_tokens; ++t)
          p.prompt.push_back(1 +
                             (static_cast<uint32_t>(i) * 104729 + t) % 31000);
        p.max_tokens = cfg.max_tokens;
        auto start = clock_type::now();
        double first = -1;
        auto o = d.generate_blocking(p, [&](const auto&) {
          if (first < 0)
            first =
              std::chrono::duration<double>(clock_type::now() - start).count();
          return true;
        });
        double total =
          std::chrono::duration<double>(clock_type::now() - start).count();
        std::lock_guard<std::mutex> guard{mtx};
        if (!o.ok) {
          ++failed;
          continue;
        }
        ++ok;
        ttft.push_back(first);
        latency.push_back(total);
        prompt_tokens += p.prompt.size();
        cached += o.cached_tokens;
        out_tokens += o.tokens.size();
        migrations += o.migrations;
        // An infinite cache serves every prefix seen before.
        if (!seen_groups.insert(group).second)
          ideal += cfg.prefix_tokens;
      }
    });
  for (auto& t : threads)
    t.join();
  double secs = std::chrono::duration<double>(clock_type::now() - t0).count();
  char buf[1024];
  std::snprintf(
    buf, sizeof(buf),
    "requests: %d ok, %d failed, %d migrated\n"
    "KV hit rate: %.1f%% of prompt tokens (an infinite cache: %.1f%%)\n"
    "TTFT: p50 %.1f ms, p99 %.1f ms; latency: p50 %.1f ms, p99 %.1f ms\n"
    "throughput: %.1f requests/s, %.0f output tokens/s over %.2f s\n",
    ok, failed, migrations,
    prompt_tokens ? 100.0 * static_cast<double>(cached) / prompt_tokens : 0.0,
    prompt_tokens ? 100.0 * static_cast<double>(ideal) / prompt_tokens : 0.0,
    1000 * pct(ttft, 0.5), 1000 * pct(ttft, 0.99), 1000 * pct(latency, 0.5),
    1000 * pct(latency, 0.99), ok / secs,
    static_cast<double>(out_tokens) / secs, secs);
  return buf;
}

} // namespace outrider::router
