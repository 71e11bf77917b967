// The search for a request's candidates in `placement`: which ranks may
// take it, whether all of them are busy, and their overlaps and costs. Two
// searches give the same lowest cost: `score_all` scores every eligible
// rank (the reference; round robin, random and a temperature need them
// all), `score_pruned` only those that can have the lowest cost.
//
// Why the pruned search is exact. A rank's cost (worker_selector.hpp) is
//   (w_o + w_d) x U + w_o x e x evicted + L,  U = uncached prompt blocks,
// where L = w_o x q x queued + w_d x decode is its load part, kept ordered
// in by_load_, and evicted = max(0, U - free), its free blocks at most its
// room, kept ordered in by_room_ (room_bound). A rank whose run of leading
// blocks, each cached or predicted, is d and that holds nothing offloaded
// after it has U = P - d, so its cost is at least
//   (w_o + w_d)(P - d) + w_o x e x max(0, P - d - room) + L.
// The index answers in groups of equal d (match_groups, predicted blocks
// ANDed in from key_bits); each group is searched member by member if
// small, else down both orders in turn (the least loaded, the roomiest):
// a member passed in neither has at least the next one's load and at most
// the next one's room, and the walk ends once that bound passes the best
// cost found; deepest group first, and a group whose bound starts above
// the best is not searched at all. Where caches are full the room term is
// what separates ranks; with the load order alone every rank of a fleet
// of full caches was scored. The ranks the bound does not cover (an
// offloaded run, the session's rank) are scored one by one first. Ties are
// kept up to 16: which of them wins is random in both searches.
#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_set>

#include "actors/router/core/endpoint_subset.hpp"
#include "actors/router/core/placement.hpp"

namespace outrider::router {

using engine::router_mode;
using engine::worker_role;

namespace {

// Ties the pruned search keeps before it stops looking for more.
constexpr size_t tie_cap = 16;

} // namespace

bool placement::eligible(uint32_t slot, const route_request& req) const {
  const auto& info = slots_[slot];
  // No role asked: any worker that decodes (aggregated or decode).
  bool role_ok =
    req.role ? info.role == *req.role : info.role != worker_role::prefill;
  if (!info.alive || !role_ok ||
      std::find(req.exclude.begin(), req.exclude.end(), info.worker_id) !=
        req.exclude.end())
    return false;
  if ((req.needs_http_endpoint && info.http_endpoint.empty()) ||
      (req.http_subset && !in_subset(*req.http_subset, info.http_endpoint)))
    return false;
  // An adapter's request goes only where the engine serves the adapter.
  if (!req.identity.lora.empty()) {
    const auto& ads = workers_.at(info.worker_id).lora_adapters;
    if (std::find(ads.begin(), ads.end(), req.identity.lora) == ads.end())
      return false;
  }
  return true;
}

std::vector<candidate> placement::candidates(const route_request& req) const {
  std::vector<candidate> cands;
  for (uint32_t s = 0; s < slots_.size(); ++s)
    if (eligible(s, req))
      cands.push_back(candidate{s, 0, slots_[s].prefill_tokens,
                                slots_[s].decode_blocks, free_blocks(s)});
  return cands;
}

bool placement::busy(const candidate& c, const route_request& req) const {
  // The KV share keeps cached prefixes alive until they are used: kv mode
  // only (round-robin and random place blind to caches, as a plain load
  // balancer does, and stay the baselines kv is measured against).
  bool by_share = cfg_.queue_kv_share > 0 && cfg_.mode == router_mode::kv &&
                  req.role != worker_role::prefill;
  if (!cfg_.queue_threshold && !by_share)
    return false;
  auto bs = static_cast<double>(std::max(1u, block_size_));
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
}

bool placement::prunable() const {
  const auto& s = cfg_.selector;
  return !cfg_.exhaustive && cfg_.mode == router_mode::kv &&
         s.temperature <= 0 && s.overlap_score_weight >= 0 &&
         s.decode_weight >= 0 && s.queue_weight >= 0 && s.evict_weight >= 0;
}

void placement::fill(candidate& c, uint32_t gpu_blocks,
                     const indexer::tiered_overlap* offloaded,
                     const std::vector<uint64_t>& seq,
                     clock::time_point now) const {
  // What the index knows, extended by the blocks predicted for the
  // requests just routed there: the leading blocks that are one or the
  // other.
  const auto& gpu = index_.tier(kv::medium::gpu);
  uint32_t n = gpu_blocks;
  while (n < seq.size() &&
         (predicted(c.slot, seq[n], now) || gpu.holds(seq[n], c.slot)))
    ++n;
  c.overlap_blocks = n;
  // The offloaded blocks after the GPU run, credited by tier; those
  // already counted as predicted (a request routed there just now will
  // compute them) are not credited twice.
  if (offloaded && offloaded->any_blocks > gpu_blocks) {
    auto extra = offloaded->any_blocks - gpu_blocks;
    auto past = std::min<uint32_t>(
      extra, c.overlap_blocks > gpu_blocks ? c.overlap_blocks - gpu_blocks : 0);
    c.offload_credit =
      (offloaded->credit - gpu_blocks) * (extra - past) / extra;
  }
}

placement::scored placement::score_all(const route_request& req,
                                       const std::vector<uint64_t>& seq) {
  scored out;
  out.cands = candidates(req);
  std::unordered_map<uint32_t, indexer::tiered_overlap> runs;
  for (const auto& o : index_.find(seq))
    runs[o.slot] = o;
  auto now = now_();
  for (auto& c : out.cands) {
    auto r = runs.find(c.slot);
    const auto* run = r == runs.end() ? nullptr : &r->second;
    uint32_t gpu = run ? run->gpu_blocks : 0;
    fill(c, gpu, run, seq, now);
    out.gpu_blocks.push_back(gpu);
    out.offloaded_blocks.push_back(
      run && run->any_blocks > gpu ? run->any_blocks - gpu : 0);
  }
  return out;
}

placement::scored placement::score_pruned(const route_request& req,
                                          const std::vector<uint64_t>& seq,
                                          uint32_t prompt_blocks) {
  scored out;
  auto now = now_();
  // Runs of blocks the index holds or that are predicted.
  auto groups = index_.find_groups(seq, &predicted_bits_);
  auto offloaded = index_.find_offloaded(seq);
  auto sel = selector();
  double best = std::numeric_limits<double>::infinity();
  size_t ties = 0;
  std::unordered_set<uint32_t> seen; // scored, or not eligible
  auto add = [&](const candidate& c, uint32_t gpu, uint32_t offloaded_blocks) {
    double k = cost(c, prompt_blocks, sel);
    if (k < best - 1e-9) {
      best = k;
      ties = 1;
    } else if (k <= best + 1e-9) {
      ++ties;
    }
    out.cands.push_back(c);
    out.gpu_blocks.push_back(gpu);
    out.offloaded_blocks.push_back(offloaded_blocks);
  };
  auto base = [&](uint32_t slot) {
    return candidate{slot, 0, slots_[slot].prefill_tokens,
                     slots_[slot].decode_blocks, free_blocks(slot)};
  };
  // First the ranks the bound does not cover, each as score_all does.
  auto exact = [&](uint32_t slot, const indexer::tiered_overlap* run) {
    if (!seen.insert(slot).second || !eligible(slot, req))
      return;
    auto c = base(slot);
    uint32_t gpu = run ? run->gpu_blocks : index_run(slot, seq);
    fill(c, gpu, run, seq, now);
    add(c, gpu, run && run->any_blocks > gpu ? run->any_blocks - gpu : 0);
  };
  for (const auto& o : offloaded)
    exact(o.slot, &o);
  if (cfg_.session.mode != session_mode::off && !req.session.empty())
    if (auto held = sessions_.find(req.session, now);
        held && held->slot < slots_.size())
      exact(held->slot, nullptr);
  // Then each group from its least loaded member, while the bound allows:
  // a member's overlap is its group's (its GPU run is found if it wins).
  auto member = [&](uint32_t slot, uint32_t blocks) {
    if (!seen.insert(slot).second || !eligible(slot, req))
      return;
    auto c = base(slot);
    c.overlap_blocks = blocks;
    add(c, unknown_run, 0);
  };
  double weight = sel.overlap_score_weight + sel.decode_weight;
  // The least a rank costs beyond its load part with `uncached` blocks to
  // compute and at most `room` free blocks.
  auto floor_of = [&](uint32_t uncached, uint64_t room) {
    double evicted =
      room == UINT64_MAX || uncached <= room ? 0.0 : double(uncached - room);
    return weight * uncached +
           sel.overlap_score_weight * sel.evict_weight * evicted;
  };
  // Past the bound nothing ties; at it, nothing does better, and once a
  // few ties are found the search ends there.
  auto done = [&](double floor, double load) {
    double bound = floor + load;
    return bound > best + 1e-6 * std::max(1.0, std::abs(best)) ||
           (ties >= tie_cap && bound >= best);
  };
  // Down both orders in turn, the least loaded and the roomiest: a rank
  // passed in neither is at least as loaded as the next in the one and
  // has no more room than the next in the other (a threshold walk), so
  // the search ends where caches are full as where they are not.
  auto walk = [&](uint32_t uncached, auto&& in_group, uint32_t blocks) {
    auto l = by_load_.begin();
    auto r = by_room_.begin();
    while (l != by_load_.end() && r != by_room_.end()) {
      if (done(floor_of(uncached, r->first), std::get<0>(*l)))
        break;
      if (auto slot = std::get<2>(*l++); in_group(slot))
        member(slot, blocks);
      if (auto slot = (r++)->second; in_group(slot))
        member(slot, blocks);
    }
  };
  const uint64_t roomiest =
    by_room_.empty() ? UINT64_MAX : by_room_.begin()->first;
  for (const auto& g : groups.groups) {
    if (by_load_.empty())
      break;
    auto uncached = prompt_blocks > g.blocks ? prompt_blocks - g.blocks : 0u;
    if (done(floor_of(uncached, roomiest), std::get<0>(*by_load_.begin())))
      break; // shallower groups start higher still
    // A group of at most a sixteenth of the ranks is searched member by
    // member (walking the load order for it would pass over the others);
    // a larger one from the least loaded, where its members are dense.
    if (g.count <= 64 || g.count * 16 <= by_load_.size())
      g.each([&](uint32_t slot) {
        const auto& s = slots_[slot];
        if (!done(floor_of(uncached, s.room_key), s.load_key))
          member(slot, g.blocks);
      });
    else
      walk(
        uncached, [&](uint32_t slot) { return g.has(slot); }, g.blocks);
  }
  // Last the ranks holding none of it, neither cached nor predicted.
  const auto& gpu = index_.tier(kv::medium::gpu);
  walk(
    prompt_blocks,
    [&](uint32_t slot) {
      return seq.empty() ||
             (!gpu.holds(seq[0], slot) && !predicted_bits_.test(seq[0], slot));
    },
    0);
  return out;
}

uint32_t placement::index_run(uint32_t slot,
                              const std::vector<uint64_t>& seq) const {
  const auto& gpu = index_.tier(kv::medium::gpu);
  uint32_t n = 0;
  for (size_t d = 0; d < walk_ahead && d < seq.size(); ++d)
    gpu.prefetch(seq[d]);
  while (n < seq.size() && gpu.holds(seq[n], slot)) {
    if (n + walk_ahead < seq.size())
      gpu.prefetch(seq[n + walk_ahead]);
    ++n;
  }
  return n;
}

uint32_t placement::walk_held(uint32_t slot, const std::vector<uint64_t>& seq) {
  return index_.tier(kv::medium::gpu).holds_along(seq, slot, held_);
}

void placement::reorder(uint32_t slot) {
  auto& s = slots_[slot];
  by_load_.erase({s.load_key, s.tiebreak, slot});
  if (!s.alive)
    return;
  auto sel = selector();
  auto queued = static_cast<double>(s.prefill_tokens) / sel.block_size;
  s.load_key = sel.overlap_score_weight * sel.queue_weight * queued +
               sel.decode_weight * static_cast<double>(s.decode_blocks);
  s.tiebreak = static_cast<uint32_t>(tie_rng_());
  by_load_.emplace(s.load_key, s.tiebreak, slot);
  reroom(slot);
}

uint64_t placement::room_bound(uint32_t slot) const {
  const auto& s = slots_[slot];
  auto taken = taken_blocks(slot);
  auto r = room_in(s.record_total, taken);
  if (s.engine_used >= 0 && s.engine_total)
    r = std::max(r, room_in(s.engine_total, taken));
  return r;
}

void placement::reroom(uint32_t slot) {
  auto& s = slots_[slot];
  by_room_.erase({s.room_key, slot});
  if (!s.alive)
    return;
  s.room_key = room_bound(slot);
  by_room_.emplace(s.room_key, slot);
}

void placement::lapse_predictions(clock::time_point now) {
  // Settled with one TTL, so in the order they lapse.
  while (!lapses_.empty() && lapses_.front().at < now) {
    const auto& l = lapses_.front();
    auto& pred = predictions_[l.slot];
    for (auto key : l.keys) {
      const auto* p = pred.find(key);
      if (!p || p->pending > 0 || p->until >= now)
        continue; // gone already, or predicted again since
      pred.erase(key);
      predicted_bits_.clear(key, l.slot);
    }
    lapses_.pop_front();
  }
}

} // namespace outrider::router
