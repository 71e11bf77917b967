#include "actors/router/core/placement.hpp"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "actors/router/core/endpoint_subset.hpp"
#include "cluster/kv/block_hash.hpp"

namespace outrider::router {

using engine::router_mode;
using engine::worker_role;

placement::placement(router_config cfg, clock_fn now, uint64_t seed)
  : cfg_(std::move(cfg)), now_(std::move(now)), rng_(seed),
    index_(kv::block_hash_seed, cfg_.tiers), sessions_(cfg_.session),
    tie_rng_(static_cast<uint32_t>(seed ^ 0x9e3779b97f4a7c15ull)) {}

int64_t placement::engine_used(const slot_info& s) const {
  return s.engine_used >= 0 && now_() <= s.engine_until ? s.engine_used : -1;
}

// The engine's fresh report, else the worker's record (0: unknown).
uint64_t placement::total_blocks(const slot_info& s) const {
  return engine_used(s) >= 0 && s.engine_total ? s.engine_total
                                               : s.record_total;
}

int64_t placement::unheld_blocks(const slot_info& s) const {
  auto used = engine_used(s);
  auto total = total_blocks(s);
  if (total == 0)
    return -1;
  auto held = used >= 0 ? static_cast<uint64_t>(used) : s.decode_blocks;
  return static_cast<int64_t>(total - std::min(total, held));
}

uint64_t placement::taken_blocks(uint32_t slot) const {
  auto queued = slots_[slot].prefill_tokens / std::max(1u, block_size_);
  return index_.held(slot) + queued;
}

uint64_t placement::room_in(uint64_t total, uint64_t taken) {
  return total == 0 ? UINT64_MAX : total - std::min(total, taken);
}

// What the rank's cache can take before it evicts: its blocks less those
// the index says it caches and those its queued prompts will store.
uint64_t placement::free_blocks(uint32_t slot) const {
  return room_in(total_blocks(slots_[slot]), taken_blocks(slot));
}

selector_config placement::selector() const {
  auto cfg = cfg_.selector;
  cfg.block_size = std::max(1u, block_size_);
  return cfg;
}

// The index of the chosen candidate, by --router-mode.
size_t placement::choose(const std::vector<candidate>& cands,
                         uint32_t prompt_blocks) {
  if (cfg_.mode == router_mode::round_robin)
    return round_robin_++ % cands.size();
  if (cfg_.mode == router_mode::random)
    return std::uniform_int_distribution<size_t>{0, cands.size() - 1}(rng_);
  auto sel = select_worker(cands, prompt_blocks, selector(), rng_);
  for (size_t i = 0; i < cands.size(); ++i)
    if (cands[i].slot == sel->slot)
      return i;
  return 0;
}

bool placement::predicted(uint32_t slot, uint64_t hash,
                          clock::time_point now) const {
  const auto* p = predictions_[slot].find(hash);
  return p && (p->pending > 0 || p->until >= now);
}

// The booking's blocks count as held on its slot until it is prefilled:
// those the index holds there now through the index (watched for
// evictions meanwhile), the others as predicted. A prompt mostly cached
// where it goes (the common case in kv mode) predicts only its tail.
void placement::predict(uint64_t key, booking& b,
                        const std::vector<uint64_t>& seq) {
  auto& pred = predictions_[b.slot];
  std::vector<uint64_t> fresh;
  fresh.reserve(seq.size());
  for (size_t i = 0; i < seq.size(); ++i)
    (held_[i] ? b.covered : fresh).push_back(seq[i]);
  if (pred.size() + fresh.size() > cfg_.prediction_cap)
    lapse_predictions(now_());
  if (pred.size() + fresh.size() > cfg_.prediction_cap) {
    b.covered.clear();
    return;
  }
  for (auto h : fresh)
    predict_one(b, h);
  if (!b.covered.empty())
    slots_[b.slot].covering.push_back(key);
}

void placement::predict_one(booking& b, uint64_t h) {
  bool added = false;
  if (predictions_[b.slot].insert(h, added).pending++ == 0)
    predicted_bits_.set(h, b.slot);
  b.pending.push_back(h);
}

void placement::uncover(uint32_t slot, const std::vector<uint64_t>& touched,
                        bool reset) {
  const auto& gpu = index_.tier(kv::medium::gpu);
  // The blocks this batch took from the rank (a reset: every one). A batch
  // that only stores costs a look at its own blocks, and one that removes
  // a lookup per covered block of each queued request, in a small sorted
  // list.
  std::vector<uint64_t> gone;
  if (!reset) {
    for (auto h : touched)
      if (!gpu.holds(h, slot))
        gone.push_back(h);
    if (gone.empty())
      return;
    std::sort(gone.begin(), gone.end());
  }
  // A booking whose covered blocks are all predicted now leaves the list.
  std::erase_if(slots_[slot].covering, [&](uint64_t key) {
    auto i = bookings_.find(key);
    if (i == bookings_.end())
      return true;
    auto& b = i->second;
    std::erase_if(b.covered, [&](uint64_t h) {
      bool lost = reset ? !gpu.holds(h, slot)
                        : std::binary_search(gone.begin(), gone.end(), h);
      if (lost)
        predict_one(b, h);
      return lost;
    });
    return b.covered.empty();
  });
}

// Prefilled (or gone before): its blocks stay predicted for the TTL, the
// time their KV events take to arrive, unless they arrived already (the
// engine published the blocks before its first token reached here):
// those go now, as they would had their events come after. Kept for the
// TTL, a fleet's fulfilled predictions filled a table every decision's
// walk reads (a lookup per prompt block).
void placement::settle(uint64_t key, booking& b) {
  if (!b.covered.empty()) {
    std::erase(slots_[b.slot].covering, key);
    b.covered.clear();
    b.covered.shrink_to_fit();
  }
  if (b.pending.empty())
    return;
  auto& pred = predictions_[b.slot];
  auto expiry = now_() + cfg_.prediction_ttl;
  bool added = false;
  size_t kept = 0;
  for (auto h : b.pending) {
    auto& p = pred.insert(h, added);
    if (p.pending > 0)
      --p.pending;
    if (p.pending == 0 && p.indexed) {
      pred.erase(h);
      predicted_bits_.clear(h, b.slot);
      continue;
    }
    p.until = expiry;
    b.pending[kept++] = h;
  }
  b.pending.resize(kept);
  if (!b.pending.empty())
    lapses_.push_back({expiry, b.slot, std::move(b.pending)});
  b.pending.clear();
  b.pending.shrink_to_fit();
}

size_t placement::predicted_blocks() const {
  size_t n = 0;
  for (const auto& pred : predictions_)
    n += pred.size();
  return n;
}

placement::choice placement::decide(const route_request& req) {
  choice out;
  auto& d = out.d;
  auto bs = std::max(1u, block_size_);
  out.prompt_blocks = static_cast<uint32_t>((req.tokens.size() + bs - 1) / bs);
  out.seq =
    kv::sequence_keys(req.tokens.data(), req.tokens.size(), bs, req.identity);
  const auto& seq = out.seq;
  // Who may take it, and whether every one of them is busy: all of them
  // for the exhaustive search; for the pruned one, from the least loaded
  // until one is not busy.
  bool pruned = prunable();
  scored found;
  bool any = false, busy_all = true;
  if (pruned) {
    for (const auto& [load, tie, slot] : by_load_) {
      if (!eligible(slot, req))
        continue;
      any = true;
      candidate c{slot, 0, slots_[slot].prefill_tokens, 0};
      if (!busy(c, req)) {
        busy_all = false;
        break;
      }
    }
  } else {
    found.cands = candidates(req);
    any = !found.cands.empty();
    busy_all = std::all_of(found.cands.begin(), found.cands.end(),
                           [&](const candidate& c) { return busy(c, req); });
  }
  if (!any) {
    d.no_worker = true;
    d.error = req.role ? std::string{"no "} + engine::to_string(*req.role) +
                           " worker is available"
                       : "no worker is available";
    if (!req.identity.lora.empty())
      d.error += " serving adapter '" + req.identity.lora + "'";
    return out;
  }
  if (busy_all) {
    d.busy = true;
    d.error = "every worker is above the queue threshold";
    // What it would still compute at best: its weight in the queue.
    d.block_size = bs;
    d.prompt_blocks = out.prompt_blocks;
    auto groups = index_.find_groups(seq);
    if (!groups.groups.empty())
      d.best_overlap_blocks = groups.groups.front().blocks;
    return out;
  }
  out.found =
    pruned ? score_pruned(req, seq, out.prompt_blocks) : score_all(req, seq);
  const auto& cands = out.found.cands;
  out.chosen = follow_session(cands, out.prompt_blocks,
                              choose(cands, out.prompt_blocks), req, d);
  explain(d, cands, out.chosen, out.prompt_blocks);
  d.scored = static_cast<uint32_t>(cands.size());
  if (pruned)
    d.candidates = static_cast<uint32_t>(by_load_.size());
  out.ready = true;
  return out;
}

route_decision placement::book(const route_request& req, choice sel) {
  auto d = std::move(sel.d);
  if (!sel.ready)
    return d;
  const auto& seq = sel.seq;
  auto prompt_blocks = sel.prompt_blocks;
  auto bs = std::max(1u, block_size_);
  auto slot = sel.found.cands[sel.chosen].slot;
  // The chosen rank's GPU run, if the search did not read it, and in kv
  // mode which blocks its booking finds cached: one walk for both.
  uint32_t overlap_blocks = sel.found.gpu_blocks[sel.chosen];
  if (overlap_blocks == unknown_run || cfg_.mode == router_mode::kv) {
    auto run = walk_held(slot, seq);
    if (overlap_blocks == unknown_run)
      overlap_blocks = run;
  }
  d.offloaded_blocks = sel.found.offloaded_blocks[sel.chosen];
  auto& info = slots_[slot];
  d.queued_prefill_tokens = info.prefill_tokens;
  d.held_decode_blocks = info.decode_blocks;
  d.engine_used_kv_blocks = engine_used(info);
  d.block_size = bs;
  // Blocks predicted there are computed by a request ahead of this one:
  // they are booked as cached.
  auto reused = std::max(overlap_blocks, d.chosen_overlap_blocks);
  if (cfg_.mode == router_mode::kv && cfg_.priority_overlap > 0 &&
      prompt_blocks > 0 &&
      overlap_blocks >= cfg_.priority_overlap * prompt_blocks)
    d.priority = -1;
  booking b;
  b.slot = slot;
  b.priority = d.priority;
  b.prefill_tokens = req.tokens.size() -
                     std::min<size_t>(req.tokens.size(), size_t{reused} * bs);
  b.decode_blocks = prompt_blocks - std::min(prompt_blocks, reused);
  d.key = next_key_++;
  if (cfg_.mode == router_mode::kv)
    predict(d.key, b, seq);
  info.prefill_tokens += b.prefill_tokens;
  info.decode_blocks += b.decode_blocks;
  reorder(slot);
  d.ok = true;
  if (b.prefill_tokens)
    info.unprefilled[{b.priority, d.key}] = b.prefill_tokens;
  d.slot = slot;
  bookings_[d.key] = std::move(b);
  d.worker_id = info.worker_id;
  d.endpoint = info.endpoint;
  d.engine_endpoint = info.engine_endpoint;
  d.protocol = info.protocol;
  d.role = info.role;
  d.bootstrap_endpoint = info.bootstrap_endpoint;
  d.http_endpoint = info.http_endpoint;
  d.rank = info.rank;
  d.overlap_blocks = overlap_blocks;
  d.prompt_blocks = static_cast<uint32_t>(seq.size());
  return d;
}

// What the decision gave up, for the decision metrics and the status
// page: the best overlap on offer and the load of the rank that had it.
void placement::explain(route_decision& d, const std::vector<candidate>& cands,
                        size_t chosen, uint32_t prompt_blocks) const {
  size_t best = chosen;
  for (size_t i = 0; i < cands.size(); ++i)
    if (cands[i].overlap_blocks > cands[best].overlap_blocks)
      best = i;
  auto cfg = selector();
  d.candidates = static_cast<uint32_t>(cands.size());
  d.chosen_overlap_blocks = cands[chosen].overlap_blocks;
  d.best_overlap_blocks = cands[best].overlap_blocks;
  d.cost = cost(cands[chosen], prompt_blocks, cfg);
  d.best_overlap_cost = cost(cands[best], prompt_blocks, cfg);
  d.best_overlap_prefill_tokens = cands[best].active_prefill_tokens;
}

std::optional<uint32_t> placement::unbook(uint64_t key, bool finished) {
  auto i = bookings_.find(key);
  if (i == bookings_.end())
    return std::nullopt;
  auto& b = i->second;
  auto& s = slots_[b.slot];
  auto slot = b.slot;
  if (!b.prefilled) {
    s.prefill_tokens -= std::min(s.prefill_tokens, b.prefill_tokens);
    s.unprefilled.erase({b.priority, key});
    b.prefilled = true;
    settle(key, b);
  }
  if (finished) {
    s.decode_blocks -= std::min(s.decode_blocks, b.decode_blocks);
    bookings_.erase(i);
  }
  reorder(slot);
  return slot;
}

std::optional<uint32_t> placement::prefilled(uint64_t key) {
  return unbook(key, false);
}

std::optional<uint32_t> placement::release(uint64_t key) {
  return unbook(key, true);
}

void placement::retune(const router_config& next) {
  take_live_settings(cfg_, next);
  // The load order is by the weighted load: every rank is placed again.
  for (uint32_t slot = 0; slot < slots_.size(); ++slot)
    reorder(slot);
}

bool placement::tidy(size_t budget) {
  bool left = index_.tidy(budget);
  left = predicted_bits_.tidy(budget) || left;
  for (auto& p : predictions_)
    left = p.tidy(budget) || left;
  return left;
}

} // namespace outrider::router
