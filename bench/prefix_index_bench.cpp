// The router's global index: apply rate, find_matches latency and memory per
// indexed block, each against a baseline measured in the same run.
//
//   build/bench/prefix_index_bench [WORKERS BLOCKS_PER_WORKER [unique]
//                                  [content]]
//
// unique: each cached prompt's last 96 blocks are its worker's own.
// content: a block's engine hash follows from its prefix (its parent's
// hash and its tokens), as vLLM's and SGLang's do, so a worker caching a
// prefix again (another prompt of its group, the same prompt twice) holds
// it once; without it every store has engine hashes of its own (the
// original workload: about 30% of a worker's engine blocks are then
// copies of prefixes it holds already).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <malloc.h>
#include <random>
#include <string>
#include <unistd.h>
#include <unordered_set>
#include <vector>

#include "actors/indexer/prefix_index.hpp"
#include "actors/indexer/tiered_index.hpp"
#include "cluster/kv/block_hash.hpp"

using namespace outrider;
using clock_type = std::chrono::steady_clock;

namespace {

constexpr uint32_t block_size = 16;
// Defaults; `prefix_index_bench WORKERS BLOCKS_PER_WORKER` for a fleet.
int workers = 64;
size_t blocks_per_worker = 16000;
constexpr size_t prompt_blocks = 128;

// Pages resident (/proc/self/statm), in bytes.
size_t resident() {
  size_t pages = 0, res = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%zu %zu", &pages, &res) != 2)
      res = 0;
    std::fclose(f);
  }
  return res * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

// malloc's blocks in use, its own mappings (large blocks) and the index
// tables' arrays mapped apart (table_memory::take, 4 MiB and more).
size_t heap_in_use() {
  auto m = mallinfo2();
  return m.uordblks + m.hblkhd +
         outrider::indexer::table_memory::mapped().load();
}

} // namespace

int main(int argc, char** argv) {
  if (argc > 2) {
    workers = std::atoi(argv[1]);
    blocks_per_worker = std::strtoul(argv[2], nullptr, 10);
  }
  // "unique": each cached prompt's last 96 blocks are the worker's own (as
  // a fleet's churn is), so most blocks have one holder.
  bool unique = false, content = false;
  for (int i = 3; i < argc; ++i) {
    unique = unique || std::string(argv[i]) == "unique";
    content = content || std::string(argv[i]) == "content";
  }
  std::mt19937_64 rng{42};
  // 400 prompts of 128 blocks; each shares its first 32 blocks with the
  // other prompts of its group of 8 (system prompts, few-shot examples).
  std::vector<std::vector<uint32_t>> prompts;
  for (int p = 0; p < 400; ++p) {
    std::vector<uint32_t> t;
    for (size_t i = 0; i < prompt_blocks * block_size; ++i) {
      bool shared = i < 32 * block_size;
      uint64_t key = shared ? static_cast<uint64_t>(p / 8) : rng();
      t.push_back(static_cast<uint32_t>((key * 2654435761u + i) % 32000));
    }
    prompts.push_back(std::move(t));
  }
  // Each worker caches whole prompts, as engine events say: one BlockStored
  // per prompt, engine hashes of its own.
  std::vector<std::vector<kv::kv_event>> batches(workers);
  uint64_t engine_hash = 1;
  size_t block_events = 0;
  for (int w = 0; w < workers; ++w)
    for (size_t n = 0; n < blocks_per_worker / prompt_blocks; ++n) {
      const auto& p = prompts[rng() % prompts.size()];
      kv::block_stored s;
      s.block_size = block_size;
      s.token_ids = p;
      if (unique)
        for (size_t i = 32 * block_size; i < s.token_ids.size(); ++i)
          s.token_ids[i] = static_cast<uint32_t>(rng() % 32000);
      if (content) {
        // The chain's own hashes, salted per worker.
        auto seq = kv::sequence_hashes(s.token_ids.data(), s.token_ids.size(),
                                       block_size);
        for (auto h : seq)
          s.block_hashes.push_back(
            h ^ (0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(w + 1)));
      } else {
        for (size_t b = 0; b < prompt_blocks; ++b)
          s.block_hashes.push_back(engine_hash++);
      }
      block_events += prompt_blocks;
      batches[static_cast<size_t>(w)].push_back(std::move(s));
    }

  // Baseline for applying: hashing the blocks alone.
  auto t0 = clock_type::now();
  uint64_t sink = 0;
  for (const auto& b : batches)
    for (const auto& ev : b) {
      const auto& s = std::get<kv::block_stored>(ev);
      sink ^=
        kv::sequence_hashes(s.token_ids.data(), s.token_ids.size(), block_size)
          .back();
    }
  double hash_s = std::chrono::duration<double>(clock_type::now() - t0).count();

  auto heap0 = heap_in_use();
  auto rss0 = resident();
  indexer::prefix_index index{kv::block_hash_seed};
  // Memory is also sampled along the fill's second half (32 points,
  // outside the apply time): a table's bytes per entry depend on where the
  // fill stops between two of its growths, and a fleet's index may stop
  // anywhere. Half the fill to all of it spans a whole doubling.
  std::vector<double> along;
  double apply_s = 0;
  for (int w = 0; w < workers; ++w) {
    t0 = clock_type::now();
    index.apply(static_cast<indexer::slot_id>(w),
                batches[static_cast<size_t>(w)]);
    apply_s += std::chrono::duration<double>(clock_type::now() - t0).count();
    if (2 * (w + 1) >= workers && (w + 1) % std::max(1, workers / 64) == 0)
      along.push_back(static_cast<double>(heap_in_use() - heap0) /
                      static_cast<double>(index.entries()));
  }
  auto heap1 = heap_in_use();
  auto rss1 = resident();

  // find_matches on prompts the cluster has seen, against a baseline of 128
  // lookups in a plain hash set of the same size.
  std::vector<std::vector<uint64_t>> queries;
  std::unordered_set<uint64_t> plain;
  for (const auto& p : prompts) {
    queries.push_back(kv::sequence_hashes(p.data(), p.size(), block_size));
    for (auto h : queries.back())
      plain.insert(h);
  }
  std::vector<double> lat, base;
  size_t matched = 0;
  for (int i = 0; i < 20000; ++i) {
    const auto& q = queries[rng() % queries.size()];
    auto a = clock_type::now();
    auto m = index.find_matches(q);
    auto b = clock_type::now();
    size_t found = 0;
    for (auto h : q)
      found += plain.count(h);
    auto c = clock_type::now();
    matched += m.size();
    sink ^= found;
    lat.push_back(std::chrono::duration<double, std::micro>(b - a).count());
    base.push_back(std::chrono::duration<double, std::micro>(c - b).count());
  }
  std::sort(lat.begin(), lat.end());
  std::sort(base.begin(), base.end());
  auto pct = [](const std::vector<double>& v, double p) {
    return v[static_cast<size_t>(p * static_cast<double>(v.size() - 1))];
  };

  std::printf("%d workers x %zu blocks (%zu block events), %zu distinct "
              "blocks, %zu (worker, block) entries\n",
              workers, blocks_per_worker, block_events, index.distinct_blocks(),
              index.entries());
  std::printf("apply: %.0f block events/s (hashing alone: %.0f/s, ratio "
              "%.2f)\n",
              static_cast<double>(block_events) / apply_s,
              static_cast<double>(block_events) / hash_s, hash_s / apply_s);
  std::printf("find_matches, %zu-block prompt: p50 %.2f us, p99 %.2f us "
              "(128 plain set lookups: p50 %.2f, p99 %.2f; p99 ratio %.2f); "
              "%.1f slots matched on average\n",
              prompt_blocks, pct(lat, 0.5), pct(lat, 0.99), pct(base, 0.5),
              pct(base, 0.99), pct(lat, 0.99) / pct(base, 0.99),
              static_cast<double>(matched) / 20000);
  std::printf(
    "memory: %.1f bytes per (worker, block) entry (heap grew "
    "%.1f MiB; resident grew %.1f MiB: %.1f bytes per entry)\n",
    static_cast<double>(heap1 - heap0) / static_cast<double>(index.entries()),
    static_cast<double>(heap1 - heap0) / (1 << 20),
    static_cast<double>(rss1 - rss0) / (1 << 20),
    static_cast<double>(rss1 - rss0) / static_cast<double>(index.entries()));
  if (!along.empty()) {
    double sum = 0;
    for (double b : along)
      sum += b;
    std::printf(
      "memory along the fill's second half (%zu points): mean %.1f, min %.1f, "
      "max %.1f bytes per entry\n",
      along.size(), sum / static_cast<double>(along.size()),
      *std::min_element(along.begin(), along.end()),
      *std::max_element(along.begin(), along.end()));
  }

  // The router's own path: the tiered index with a cap on every rank (the
  // store order it keeps), GPU events only, matched with find().
  auto heap2 = heap_in_use();
  indexer::tiered_index tiered{kv::block_hash_seed};
  for (int w = 0; w < workers; ++w)
    for (auto m : {kv::medium::gpu, kv::medium::cpu, kv::medium::storage})
      tiered.set_cap(static_cast<indexer::slot_id>(w), m, 1 << 20);
  t0 = clock_type::now();
  for (int w = 0; w < workers; ++w)
    tiered.apply(static_cast<indexer::slot_id>(w),
                 batches[static_cast<size_t>(w)]);
  double tiered_s =
    std::chrono::duration<double>(clock_type::now() - t0).count();
  auto heap3 = heap_in_use();
  std::vector<double> tlat;
  for (int i = 0; i < 20000; ++i) {
    const auto& q = queries[rng() % queries.size()];
    auto a = clock_type::now();
    auto m = tiered.find(q);
    auto b = clock_type::now();
    sink ^= m.size();
    tlat.push_back(std::chrono::duration<double, std::micro>(b - a).count());
  }
  std::sort(tlat.begin(), tlat.end());
  std::printf("tiered (the router's index, capped ranks): apply %.0f block "
              "events/s (ratio to the plain index %.2f), find p50 %.2f us, "
              "p99 %.2f us (p99 ratio to find_matches %.2f), %.1f bytes per "
              "entry\n",
              static_cast<double>(block_events) / tiered_s, apply_s / tiered_s,
              pct(tlat, 0.5), pct(tlat, 0.99), pct(tlat, 0.99) / pct(lat, 0.99),
              static_cast<double>(heap3 - heap2) /
                static_cast<double>(tiered.entries()));
  return sink == 42 ? 1 : 0;
}
