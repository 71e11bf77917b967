// The router's decision at 64, 1,000 and 10,000 workers, pruned search
// against the exhaustive one in the same run, and hashing the prompt alone
// as the floor. Two figures per search: the decision proper (hash + match
// + select: `placement::decide`, issue 31's measure) and the whole
// placement (`placement::place`: the lapsed predictions' upkeep, the
// decision, and its booking: the chosen rank's run, predicted blocks and
// load).
//
// Every worker holds a 32-block system prompt; each also holds 4 whole
// prompts of 128 blocks from a pool of 400 that share it (so a few workers
// hold any given prompt); requests are prompts of the pool, as many in
// flight as half the workers (loads differ), KV events for each placed
// prompt arrive at once. 3,000 decisions warm up (unmeasured) first.
//
//   build/bench/decision_bench [decisions per size] [FILE.csv]
//   build/bench/decision_bench [decisions per size] [one size, pruned only]
//
// With NO_PREDICTION=1 in the environment the router predicts no blocks
// for the requests it places (what that bookkeeping costs a decision).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <random>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "actors/router/core/placement.hpp"
#include "cluster/kv/block_hash.hpp"

using namespace outrider;
using namespace outrider::router;
using clock_type = std::chrono::steady_clock;

namespace {

constexpr uint32_t block_size = 16;
constexpr size_t prompt_blocks = 128;
constexpr size_t system_blocks = 32;

struct figures {
  double p50 = 0, p99 = 0;               // place: decide + book
  double decide_p50 = 0, decide_p99 = 0; // decide alone
  double mean_scored = 0;
};

double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))];
}

std::vector<std::vector<uint32_t>> make_prompts(std::mt19937_64& rng) {
  std::vector<std::vector<uint32_t>> prompts;
  for (int p = 0; p < 400; ++p) {
    std::vector<uint32_t> t;
    for (size_t i = 0; i < prompt_blocks * block_size; ++i)
      t.push_back(i < system_blocks * block_size
                    ? static_cast<uint32_t>(i % 32000)
                    : static_cast<uint32_t>(rng() % 32000));
    prompts.push_back(std::move(t));
  }
  return prompts;
}

figures run(size_t workers, bool exhaustive, size_t decisions,
            const std::vector<std::vector<uint32_t>>& prompts) {
  std::mt19937_64 rng{workers};
  router_config cfg;
  cfg.selector = {1.0, 0.1, 0.25, 1.5, 0.0, block_size};
  cfg.exhaustive = exhaustive;
  if (std::getenv("NO_PREDICTION"))
    cfg.prediction_cap = 0;
  // Time moves 2 ms a decision: predictions lapse (5 s) as in a fleet
  // placing 500 requests a second, once the warm-up has filled them.
  auto now = clock_type::time_point{};
  placement p{cfg, [&now] { return now; }, 1};
  uint64_t engine_hash = 1;
  auto store = [&](const std::string& id, const std::vector<uint32_t>& t,
                   size_t blocks) {
    kv::block_stored s;
    s.block_size = block_size;
    s.token_ids.assign(t.begin(),
                       t.begin() + static_cast<long>(blocks * block_size));
    for (size_t b = 0; b < blocks; ++b)
      s.block_hashes.push_back(engine_hash++);
    p.apply_events({id, 0, false, {s}});
  };
  for (size_t w = 0; w < workers; ++w) {
    cluster::worker_record r;
    r.worker_id = "w" + std::to_string(w);
    r.instance_id = "i";
    r.model = "m";
    r.relay_endpoint = r.worker_id + ":1";
    r.kv_block_size = block_size;
    r.total_kv_blocks = 16384;
    p.add_worker(r);
    store(r.worker_id, prompts[0], system_blocks);
    for (int k = 0; k < 4; ++k)
      store(r.worker_id, prompts[rng() % prompts.size()], prompt_blocks);
  }
  std::vector<double> us, decide_us;
  double scored = 0;
  std::deque<uint64_t> running;
  constexpr size_t warm_up = 3000;
  for (size_t i = 0; i < warm_up + decisions; ++i) {
    now += std::chrono::milliseconds{2};
    route_request req;
    req.tokens = prompts[rng() % prompts.size()];
    // place() is these three steps; the first is the predictions' upkeep
    // (timed in the whole, not in the decision).
    auto t0 = clock_type::now();
    p.expire_predictions();
    auto tl = clock_type::now();
    auto picked = p.decide(req);
    auto t1 = clock_type::now();
    auto d = p.book(req, std::move(picked));
    auto t2 = clock_type::now();
    if (i >= warm_up) {
      using micros = std::chrono::duration<double, std::micro>;
      us.push_back(micros(t2 - t0).count());
      decide_us.push_back(micros(t1 - tl).count());
    }
    if (!d.ok) {
      std::fprintf(stderr, "not placed: %s\n", d.error.c_str());
      std::exit(1);
    }
    if (i >= warm_up)
      scored += d.scored;
    store(d.worker_id, req.tokens, prompt_blocks);
    p.prefilled(d.key);
    running.push_back(d.key);
    if (running.size() > workers / 2) {
      p.release(running.front());
      running.pop_front();
    }
  }
  return {percentile(us, 0.5), percentile(us, 0.99), percentile(decide_us, 0.5),
          percentile(decide_us, 0.99), scored / static_cast<double>(decisions)};
}

} // namespace

int main(int argc, char** argv) {
  size_t decisions = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 4000;
  spdlog::set_level(spdlog::level::warn);
  std::mt19937_64 rng{42};
  auto prompts = make_prompts(rng);
  // The floor: the prompt's block keys alone.
  std::vector<double> hash_us;
  for (size_t i = 0; i < decisions; ++i) {
    const auto& t = prompts[i % prompts.size()];
    auto t0 = clock_type::now();
    auto keys = kv::sequence_keys(t.data(), t.size(), block_size, {});
    hash_us.push_back(
      std::chrono::duration<double, std::micro>(clock_type::now() - t0)
        .count());
    if (keys.empty())
      return 1;
  }
  std::printf("hashing a %zu-block prompt alone: p50 %.2f us, p99 %.2f us\n",
              prompt_blocks, percentile(hash_us, 0.5),
              percentile(hash_us, 0.99));
  std::printf("%8s  %22s  %22s  %22s  %14s  %10s\n", "workers",
              "decide p50 / p99 (us)", "place p50 / p99 (us)",
              "all: place p50 / p99", "ranks scored", "p99 ratio");
  // A second argument: a CSV to write, or one fleet size alone, pruned
  // only (for a profiler).
  std::FILE* csv = nullptr;
  if (argc > 2 && std::string{argv[2]}.ends_with(".csv")) {
    csv = std::fopen(argv[2], "w");
    if (!csv)
      return 1;
    std::fprintf(csv, "workers,pruned_p50_us,pruned_p99_us,all_p50_us,"
                      "all_p99_us,pruned_scored,hash_p50_us,"
                      "decide_p50_us,decide_p99_us\n");
  } else if (argc > 2) {
    auto f = run(std::strtoul(argv[2], nullptr, 10), false, decisions, prompts);
    std::printf("pruned: decide p50 %.1f us, p99 %.1f us; place p50 %.1f "
                "us, p99 %.1f us\n",
                f.decide_p50, f.decide_p99, f.p50, f.p99);
    return 0;
  }
  for (size_t workers : {64, 1000, 10000}) {
    auto pruned = run(workers, false, decisions, prompts);
    auto all = run(workers, true, decisions, prompts);
    std::printf(
      "%8zu  %10.1f / %9.1f  %10.1f / %9.1f  %10.1f / %9.1f  %6.1f / %5.0f  "
      "%9.1fx\n",
      workers, pruned.decide_p50, pruned.decide_p99, pruned.p50, pruned.p99,
      all.p50, all.p99, pruned.mean_scored, all.mean_scored,
      all.p99 / pruned.p99);
    if (csv)
      std::fprintf(csv, "%zu,%.2f,%.2f,%.2f,%.2f,%.1f,%.2f,%.2f,%.2f\n",
                   workers, pruned.p50, pruned.p99, all.p50, all.p99,
                   pruned.mean_scored, percentile(hash_us, 0.5),
                   pruned.decide_p50, pruned.decide_p99);
  }
  if (csv)
    std::fclose(csv);
  return 0;
}
