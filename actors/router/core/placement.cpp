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
    index_(kv::block_hash_seed, cfg_.tiers), sessions_(cfg_.session) {}

int64_t placement::engine_used(const slot_info& s) const {
  return s.engine_used >= 0 && now_() - s.engine_at <= cfg_.engine_load_fresh
           ? s.engine_used
           : -1;
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

bool placement::all_busy(const std::vector<candidate>& cands,
                         const route_request& req) const {
  // The KV share keeps cached prefixes alive until they are used: kv mode
  // only (round-robin and random place blind to caches, as a plain load
  // balancer does, and stay the baselines kv is measured against).
  bool by_share = cfg_.queue_kv_share > 0 && cfg_.mode == router_mode::kv &&
                  req.role != worker_role::prefill;
  if (!cfg_.queue_threshold && !by_share)
    return false;
  auto bs = static_cast<double>(std::max(1u, block_size_));
  return std::all_of(cands.begin(), cands.end(), [&](const candidate& c) {
    auto queued = static_cast<double>(c.active_prefill_tokens);
    if (cfg_.queue_threshold && queued > *cfg_.queue_threshold)
      return true;
    const auto& s = slots_[c.slot];
    auto unheld = by_share ? unheld_blocks(s) : -1;
    if (unheld < 0)
      return false;
    // The first prompt the engine admits of those routed there is the one
    // it is computing: only those behind it wait (and lose their cached
    // prefixes).
    auto computing = s.unprefilled.empty()
                       ? 0.0
                       : static_cast<double>(s.unprefilled.begin()->second);
    auto waiting = std::max(0.0, queued - computing);
    return waiting / bs > cfg_.queue_kv_share * static_cast<double>(unheld);
  });
}

std::vector<candidate> placement::candidates(const route_request& req) const {
  std::vector<candidate> cands;
  for (uint32_t s = 0; s < slots_.size(); ++s) {
    const auto& info = slots_[s];
    // "" means any worker that decodes: aggregated or decode.
    bool role_ok =
      req.role ? info.role == *req.role : info.role != worker_role::prefill;
    if (!info.alive || !role_ok ||
        std::find(req.exclude.begin(), req.exclude.end(), info.worker_id) !=
          req.exclude.end())
      continue;
    if ((req.needs_http_endpoint && info.http_endpoint.empty()) ||
        (req.http_subset && !in_subset(*req.http_subset, info.http_endpoint)))
      continue;
    // An adapter's request goes only where the engine serves the adapter.
    if (!req.identity.lora.empty()) {
      const auto& ads = workers_.at(info.worker_id).lora_adapters;
      if (std::find(ads.begin(), ads.end(), req.identity.lora) == ads.end())
        continue;
    }
    cands.push_back(
      candidate{s, 0, info.prefill_tokens, info.decode_blocks, free_blocks(s)});
  }
  return cands;
}

// What the rank's cache can take before it evicts: its blocks less those
// the index says it caches and those its queued prompts will store.
uint64_t placement::free_blocks(uint32_t slot) const {
  const auto& s = slots_[slot];
  auto total = total_blocks(s);
  if (total == 0)
    return UINT64_MAX;
  auto queued = s.prefill_tokens / std::max(1u, block_size_);
  auto taken = index_.held(slot) + queued;
  return total - std::min<uint64_t>(total, taken);
}

selector_config placement::selector() const {
  auto cfg = cfg_.selector;
  cfg.block_size = std::max(1u, block_size_);
  return cfg;
}

// Each candidate's overlap: what the index knows, extended by the blocks
// predicted for the requests just routed there.
void placement::fill_overlaps(
  std::vector<candidate>& cands, const std::vector<uint64_t>& seq,
  const std::unordered_map<uint32_t, uint32_t>& overlap) const {
  auto now = now_();
  for (auto& c : cands) {
    auto o = overlap.find(c.slot);
    c.overlap_blocks = o == overlap.end() ? 0 : o->second;
    uint32_t n = 0;
    while (n < seq.size() && predicted(c.slot, seq[n], now))
      ++n;
    c.overlap_blocks = std::max(c.overlap_blocks, n);
  }
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
  if (pending_[slot].count(hash))
    return true;
  auto i = predicted_[slot].find(hash);
  return i != predicted_[slot].end() && i->second >= now;
}

// The booking's blocks count as held on its slot until it is prefilled.
void placement::predict(booking& b, const std::vector<uint64_t>& seq) {
  auto& pred = predicted_[b.slot];
  auto& pend = pending_[b.slot];
  if (pred.size() + pend.size() + seq.size() > cfg_.prediction_cap) {
    auto now = now_();
    std::erase_if(pred, [now](const auto& kv) { return kv.second < now; });
  }
  if (pred.size() + pend.size() + seq.size() > cfg_.prediction_cap)
    return;
  for (auto h : seq)
    ++pend[h];
  b.pending = seq;
}

// Prefilled (or gone before): its blocks stay predicted for the TTL, the
// time their KV events take to arrive.
void placement::settle(booking& b) {
  if (b.pending.empty())
    return;
  auto& pred = predicted_[b.slot];
  auto& pend = pending_[b.slot];
  auto expiry = now_() + cfg_.prediction_ttl;
  for (auto h : b.pending) {
    auto i = pend.find(h);
    if (i != pend.end() && --i->second == 0)
      pend.erase(i);
    pred[h] = expiry;
  }
  b.pending.clear();
  b.pending.shrink_to_fit();
}

route_decision placement::place(const route_request& req) {
  route_decision d;
  auto cands = candidates(req);
  if (cands.empty()) {
    d.no_worker = true;
    d.error = req.role ? std::string{"no "} + engine::to_string(*req.role) +
                           " worker is available"
                       : "no worker is available";
    if (!req.identity.lora.empty())
      d.error += " serving adapter '" + req.identity.lora + "'";
    return d;
  }
  auto bs = std::max(1u, block_size_);
  auto prompt_blocks = static_cast<uint32_t>((req.tokens.size() + bs - 1) / bs);
  auto seq =
    kv::sequence_keys(req.tokens.data(), req.tokens.size(), bs, req.identity);
  auto found = index_.find(seq);
  if (all_busy(cands, req)) {
    d.busy = true;
    d.error = "every worker is above the queue threshold";
    // What it would still compute at best: its weight in the queue.
    d.block_size = bs;
    d.prompt_blocks = prompt_blocks;
    for (const auto& o : found)
      d.best_overlap_blocks = std::max(d.best_overlap_blocks, o.gpu_blocks);
    return d;
  }
  // What the index knows, in every mode (the hit-rate metrics want it):
  // the GPU run, and the offloaded blocks after it, credited by tier.
  std::unordered_map<uint32_t, uint32_t> overlap;
  std::unordered_map<uint32_t, double> offloaded;
  std::unordered_map<uint32_t, uint32_t> offloaded_blocks;
  for (const auto& o : found) {
    overlap[o.slot] = o.gpu_blocks;
    if (o.any_blocks > o.gpu_blocks) {
      offloaded[o.slot] = o.credit - o.gpu_blocks;
      offloaded_blocks[o.slot] = o.any_blocks - o.gpu_blocks;
    }
  }
  fill_overlaps(cands, seq, overlap);
  // Offloaded blocks already counted as predicted (a request routed there
  // just now will compute them) are not credited twice.
  for (auto& c : cands)
    if (auto i = offloaded.find(c.slot); i != offloaded.end()) {
      auto gpu = overlap[c.slot];
      auto n = offloaded_blocks[c.slot];
      auto past = std::min<uint32_t>(
        n, c.overlap_blocks > gpu ? c.overlap_blocks - gpu : 0);
      c.offload_credit = i->second * (n - past) / n;
    }
  auto chosen =
    follow_session(cands, prompt_blocks, choose(cands, prompt_blocks), req, d);
  auto slot = cands[chosen].slot;
  explain(d, cands, chosen, prompt_blocks);
  auto o = overlap.find(slot);
  uint32_t overlap_blocks = o == overlap.end() ? 0 : o->second;
  if (auto off = offloaded_blocks.find(slot); off != offloaded_blocks.end())
    d.offloaded_blocks = off->second;
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
  if (cfg_.mode == router_mode::kv)
    predict(b, seq);
  info.prefill_tokens += b.prefill_tokens;
  info.decode_blocks += b.decode_blocks;
  d.ok = true;
  d.key = next_key_++;
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
    settle(b);
  }
  if (finished) {
    s.decode_blocks -= std::min(s.decode_blocks, b.decode_blocks);
    bookings_.erase(i);
  }
  return slot;
}

std::optional<uint32_t> placement::prefilled(uint64_t key) {
  return unbook(key, false);
}

std::optional<uint32_t> placement::release(uint64_t key) {
  return unbook(key, true);
}

} // namespace outrider::router
