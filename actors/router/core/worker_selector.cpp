#include "actors/router/core/worker_selector.hpp"

#include <algorithm>
#include <cmath>

namespace outrider::router {

double cost(const candidate& c, uint32_t prompt_blocks,
            const selector_config& cfg) {
  double uncached = prompt_blocks > c.overlap_blocks
                      ? static_cast<double>(prompt_blocks - c.overlap_blocks)
                      : 0.0;
  // An offloaded block is loaded back, not computed: it counts as cached
  // by its tier's weight.
  uncached = std::max(0.0, uncached - c.offload_credit);
  double queued =
    static_cast<double>(c.active_prefill_tokens) / std::max(1u, cfg.block_size);
  // On a full cache every new block evicts a cached one, which may be the
  // prefix of a later prompt: computing elsewhere what is cached here costs
  // more than the compute.
  double evicted =
    c.free_blocks == UINT64_MAX
      ? 0.0
      : std::max(0.0, uncached - static_cast<double>(c.free_blocks));
  double prefill =
    uncached + cfg.evict_weight * evicted + cfg.queue_weight * queued;
  // Cached blocks are held already: only the new ones add to decode load.
  double decode = static_cast<double>(c.active_decode_blocks) + uncached;
  return cfg.overlap_score_weight * prefill + cfg.decode_weight * decode;
}

std::optional<selection> select_worker(const std::vector<candidate>& cands,
                                       uint32_t prompt_blocks,
                                       const selector_config& cfg,
                                       std::mt19937_64& rng) {
  if (cands.empty())
    return std::nullopt;
  std::vector<double> costs;
  costs.reserve(cands.size());
  for (const auto& c : cands)
    costs.push_back(cost(c, prompt_blocks, cfg));
  size_t pick = 0;
  if (cfg.temperature <= 0) {
    double best = *std::min_element(costs.begin(), costs.end());
    std::vector<size_t> ties;
    for (size_t i = 0; i < costs.size(); ++i)
      if (costs[i] <= best + 1e-9)
        ties.push_back(i);
    pick = ties[std::uniform_int_distribution<size_t>{0, ties.size() - 1}(rng)];
  } else {
    // Costs are normalised to [0, 1] so that the temperature means the same
    // whatever the prompt length.
    double lo = *std::min_element(costs.begin(), costs.end());
    double hi = *std::max_element(costs.begin(), costs.end());
    double span = hi > lo ? hi - lo : 1.0;
    std::vector<double> weights;
    for (double c : costs)
      weights.push_back(std::exp(-((c - lo) / span) / cfg.temperature));
    pick =
      std::discrete_distribution<size_t>{weights.begin(), weights.end()}(rng);
  }
  return selection{cands[pick].slot, costs[pick], cands[pick].overlap_blocks};
}

} // namespace outrider::router
