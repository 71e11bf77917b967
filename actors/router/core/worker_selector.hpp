#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <vector>

namespace outrider::router {

/// One place a request could go, with what the router knows about it.
struct candidate {
  uint32_t slot = 0;                  // a (worker, data-parallel rank)
  uint32_t overlap_blocks = 0;        // prompt blocks it already caches
  uint64_t active_prefill_tokens = 0; // prompt tokens it still has to compute
  uint64_t active_decode_blocks = 0;  // KV blocks its running requests hold
  // KV blocks it could fill without evicting a cached one (never used, or
  // left after what it caches and what its queue will store); unknown: max.
  uint64_t free_blocks = UINT64_MAX;
  // Blocks after those held only offloaded (CPU, storage), by tier weight.
  double offload_credit = 0;
};

/// 1.0 everywhere (evict 0) is the plain cost; the router's defaults (0.1
/// decode, 0.25 queue, 1.5 evict) come from the option table, chosen by
/// bench/trace_replay.py (docs/benchmarks.md).
struct selector_config {
  double overlap_score_weight = 1.0;
  double decode_weight = 1.0;
  double queue_weight = 1.0; // queued blocks against the prompt's own
  double evict_weight = 0.0; // per uncached block that evicts a cached one
  double temperature = 0.0;  // 0: lowest cost wins (ties at random)
  uint32_t block_size = 64;
};

struct selection {
  uint32_t slot = 0;
  double cost = 0;
  uint32_t overlap_blocks = 0;
};

/// The cost of sending a prompt of `prompt_blocks` blocks to `c`:
/// weight x (blocks it must prefill, its own queue included, plus evict
/// weight x those of them that push a cached block out of a full cache) +
/// decode weight x the decode blocks it will hold (those it holds already,
/// plus the prompt's uncached ones: cached blocks are shared, not held
/// twice).
double cost(const candidate& c, uint32_t prompt_blocks,
            const selector_config& cfg);

/// Picks the candidate of lowest cost, or samples with softmax(-cost / T)
/// when a temperature is set. nullopt when there are no candidates.
std::optional<selection> select_worker(const std::vector<candidate>& cands,
                                       uint32_t prompt_blocks,
                                       const selector_config& cfg,
                                       std::mt19937_64& rng);

} // namespace outrider::router
