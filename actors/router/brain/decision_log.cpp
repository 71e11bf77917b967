#include "actors/router/brain/decision_log.hpp"

#include <algorithm>
#include <chrono>

#include <spdlog/spdlog.h>

namespace outrider::router {

namespace {

const char* placed_help = "Blocks over all placements: of the prompts, of "
                          "the best overlap on offer, of the chosen rank's "
                          "overlap, held after it only in the chosen rank's "
                          "offload tiers, and served from the engines' "
                          "caches";

} // namespace

void decision_log::served(const route_decision& d, uint64_t cached_tokens) {
  auto& m = runtime::global_metrics();
  static auto& served = m.get_counter("outrider_router_placed_blocks_total",
                                      placed_help, {{"of", "served"}});
  // The chosen overlap the engine did not serve: evicted while the request
  // waited in the engine's queue, or predicted blocks not there in time.
  static auto& unserved = m.get_histogram(
    "outrider_router_overlap_unserved_blocks",
    "Per finished request: the chosen rank's overlap (blocks, predicted "
    "ones included) minus the blocks its engine served from cache",
    {0, 16, 64, 256, 1024, 4096});
  auto blocks = cached_tokens / std::max(1u, d.block_size);
  served.inc(blocks);
  unserved.observe(static_cast<double>(
    d.chosen_overlap_blocks > blocks ? d.chosen_overlap_blocks - blocks : 0));
}

decision_log::decision_log(size_t keep) : keep_(keep) {
  auto& m = runtime::global_metrics();
  forgone_ = &m.get_histogram(
    "outrider_router_overlap_forgone_blocks",
    "Per placement: the best overlap on offer minus the chosen rank's "
    "(blocks, predicted ones included)",
    {0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 1024});
  const char* help = "Placements by how the chosen rank's overlap compares "
                     "with the best on offer";
  best_ = &m.get_counter("outrider_router_placement_choices_total", help,
                         {{"choice", "best_overlap"}});
  less_ = &m.get_counter("outrider_router_placement_choices_total", help,
                         {{"choice", "less_overlap"}});
  none_ = &m.get_counter("outrider_router_placement_choices_total", help,
                         {{"choice", "no_overlap_on_offer"}});
  queued_ = &m.get_histogram(
    "outrider_router_chosen_queue_tokens",
    "Prompt tokens queued on the chosen rank when a request was placed",
    {0, 512, 2048, 8192, 32768, 131072, 524288});
  // Where hits go: prompt blocks placed, the best overlap on offer and the
  // chosen rank's (predicted blocks included), against the cached tokens
  // the engines then report.
  const auto* blocks = placed_help;
  prompt_blocks_ = &m.get_counter("outrider_router_placed_blocks_total", blocks,
                                  {{"of", "prompt"}});
  best_blocks_ = &m.get_counter("outrider_router_placed_blocks_total", blocks,
                                {{"of", "best_overlap"}});
  chosen_blocks_ = &m.get_counter("outrider_router_placed_blocks_total", blocks,
                                  {{"of", "chosen_overlap"}});
  offloaded_blocks_ = &m.get_counter("outrider_router_placed_blocks_total",
                                     blocks, {{"of", "offloaded"}});
}

void decision_log::record(const route_decision& d) {
  auto forgone = d.best_overlap_blocks - d.chosen_overlap_blocks;
  forgone_->observe(static_cast<double>(forgone));
  queued_->observe(static_cast<double>(d.queued_prefill_tokens));
  (d.best_overlap_blocks == 0 ? none_ : forgone == 0 ? best_ : less_)->inc();
  prompt_blocks_->inc(d.prompt_blocks);
  best_blocks_->inc(d.best_overlap_blocks);
  chosen_blocks_->inc(d.chosen_overlap_blocks);
  offloaded_blocks_->inc(d.offloaded_blocks);
  spdlog::debug("router: placed on {} rank {} of {} ({} scored): overlap "
                "{}/{} blocks "
                "(best on offer {}, queued {} tokens there, cost {:.1f} vs "
                "{:.1f}); queued {} tokens here, {} decode blocks",
                d.worker_id, d.rank, d.candidates, d.scored,
                d.chosen_overlap_blocks, d.prompt_blocks, d.best_overlap_blocks,
                d.best_overlap_prefill_tokens, d.cost, d.best_overlap_cost,
                d.queued_prefill_tokens, d.held_decode_blocks);
  entry e;
  e.at_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
              std::chrono::system_clock::now().time_since_epoch())
              .count();
  e.worker_id = d.worker_id;
  e.rank = d.rank;
  e.candidates = d.candidates;
  e.scored = d.scored;
  e.prompt_blocks = d.prompt_blocks;
  e.overlap_blocks = d.chosen_overlap_blocks;
  e.best_overlap_blocks = d.best_overlap_blocks;
  e.queued_prefill_tokens = d.queued_prefill_tokens;
  e.best_overlap_prefill_tokens = d.best_overlap_prefill_tokens;
  entries_.push_front(std::move(e));
  if (entries_.size() > keep_)
    entries_.pop_back();
}

nlohmann::json decision_log::recent() const {
  auto out = nlohmann::json::array();
  for (const auto& e : entries_)
    out.push_back(
      {{"at_ms", e.at_ms},
       {"worker", e.worker_id},
       {"rank", e.rank},
       {"candidates", e.candidates},
       {"scored", e.scored},
       {"prompt_blocks", e.prompt_blocks},
       {"overlap_blocks", e.overlap_blocks},
       {"best_overlap_blocks", e.best_overlap_blocks},
       {"queued_prefill_tokens", e.queued_prefill_tokens},
       {"best_overlap_queued_tokens", e.best_overlap_prefill_tokens}});
  return out;
}

} // namespace outrider::router
