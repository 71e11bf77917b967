#include "actors/router/dispatch/demo_workload.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

namespace outrider::router {

namespace {

using clock_type = std::chrono::steady_clock;

double pct(std::vector<double> v, double p) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * static_cast<double>(v.size() - 1))];
}

// Deterministic filler tokens (the simulator's vocabulary is < 32000).
void append(std::vector<uint32_t>& to, uint32_t seed, uint32_t n) {
  for (uint32_t t = 0; t < n; ++t)
    to.push_back(1 + (seed * 2654435761u + t * 7919u) % 31000);
}

struct tally {
  std::mutex mtx;
  std::vector<double> ttft, latency;
  uint64_t prompt_tokens = 0, cached = 0, out_tokens = 0, ideal = 0;
  int ok = 0, failed = 0, migrations = 0;
  std::set<int> systems_seen; // for the infinite-cache bound
};

// One conversation: turn after turn, each sent when the last is answered.
void converse(dispatcher& d, const workload_config& cfg, int conv, int turns,
              tally& t) {
  auto system = static_cast<uint32_t>(conv % cfg.system_prompts);
  std::vector<uint32_t> history;
  append(history, 1000003u * (system + 1), cfg.system_tokens);
  for (int turn = 0; turn < turns; ++turn) {
    // What an infinite cache holds of this prompt: the conversation so far,
    // or on its first turn the system prompt once anyone used it.
    uint64_t reusable = history.size();
    if (turn == 0) {
      std::lock_guard<std::mutex> guard{t.mtx};
      if (!t.systems_seen.insert(static_cast<int>(system)).second)
        reusable = cfg.system_tokens;
      else
        reusable = 0;
    }
    append(history, static_cast<uint32_t>(conv * 131 + turn * 7 + 17),
           cfg.user_tokens);
    generate_params p;
    p.prompt = history;
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
    std::lock_guard<std::mutex> guard{t.mtx};
    if (!o.ok) {
      ++t.failed;
      return; // the conversation cannot go on without its answer
    }
    ++t.ok;
    t.ttft.push_back(first);
    t.latency.push_back(total);
    t.prompt_tokens += p.prompt.size();
    t.cached += o.cached_tokens;
    t.out_tokens += o.tokens.size();
    t.migrations += o.migrations;
    t.ideal += reusable / 16 * 16; // engines cache whole 16-token blocks
    history.insert(history.end(), o.tokens.begin(), o.tokens.end());
  }
}

std::string summary(tally& t, const workload_config& cfg, double secs) {
  double hit =
    t.prompt_tokens ? static_cast<double>(t.cached) / t.prompt_tokens : 0;
  double ideal =
    t.prompt_tokens ? static_cast<double>(t.ideal) / t.prompt_tokens : 0;
  char buf[1024];
  std::snprintf(
    buf, sizeof(buf),
    "requests: %d ok, %d failed, %d migrated\n"
    "KV hit rate: %.1f%% of prompt tokens (an infinite cache: %.1f%%)\n"
    "TTFT: p50 %.1f ms, p99 %.1f ms; latency: p50 %.1f ms, p99 %.1f ms\n"
    "throughput: %.1f requests/s, %.0f output tokens/s over %.2f s\n",
    t.ok, t.failed, t.migrations, 100 * hit, 100 * ideal,
    1000 * pct(t.ttft, 0.5), 1000 * pct(t.ttft, 0.99),
    1000 * pct(t.latency, 0.5), 1000 * pct(t.latency, 0.99), t.ok / secs,
    static_cast<double>(t.out_tokens) / secs, secs);
  nlohmann::json j{{"label", cfg.label},
                   {"ok", t.ok},
                   {"failed", t.failed},
                   {"hit_rate", hit},
                   {"ideal_hit_rate", ideal},
                   {"ttft_p50_ms", 1000 * pct(t.ttft, 0.5)},
                   {"ttft_p99_ms", 1000 * pct(t.ttft, 0.99)},
                   {"latency_p50_ms", 1000 * pct(t.latency, 0.5)},
                   {"requests_per_s", t.ok / secs},
                   {"seconds", secs}};
  return std::string{buf} + "demo-result: " + j.dump() + "\n";
}

} // namespace

std::string run_demo_workload(dispatcher& d, const workload_config& cfg) {
  tally t;
  int convs = std::max(1, std::min(cfg.conversations, cfg.requests));
  auto t0 = clock_type::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < convs; ++c) {
    // Turns spread over the conversations; the first ones get the rest.
    int turns = cfg.requests / convs + (c < cfg.requests % convs ? 1 : 0);
    threads.emplace_back([&, c, turns] {
      std::this_thread::sleep_for(std::chrono::milliseconds{cfg.stagger_ms} *
                                  c);
      converse(d, cfg, c, turns, t);
    });
  }
  // Progress, every two seconds, until the last conversation ends.
  std::mutex done_mtx;
  std::condition_variable done_cv;
  bool done = false;
  std::thread progress{[&] {
    std::unique_lock<std::mutex> lock{done_mtx};
    while (
      !done_cv.wait_for(lock, std::chrono::seconds{2}, [&] { return done; })) {
      std::lock_guard<std::mutex> guard{t.mtx};
      std::fprintf(stderr,
                   "[%s] %d/%d requests, KV hit rate %.1f%%, TTFT p50 %.0f "
                   "ms\n",
                   cfg.label.c_str(), t.ok + t.failed, cfg.requests,
                   t.prompt_tokens ? 100.0 * static_cast<double>(t.cached) /
                                       static_cast<double>(t.prompt_tokens)
                                   : 0.0,
                   1000 * pct(t.ttft, 0.5));
    }
  }};
  for (auto& th : threads)
    th.join();
  {
    std::lock_guard<std::mutex> guard{done_mtx};
    done = true;
  }
  done_cv.notify_all();
  progress.join();
  double secs = std::chrono::duration<double>(clock_type::now() - t0).count();
  return summary(t, cfg, secs);
}

} // namespace outrider::router
