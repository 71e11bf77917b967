#include "actors/router/kv_router.hpp"

#include <chrono>
#include <map>
#include <random>
#include <unordered_map>

#include <spdlog/spdlog.h>

#include "actors/indexer/prefix_index.hpp"
#include "actors/router/block_hash.hpp"
#include "runtime/metrics.hpp"

namespace outrider::router {

namespace {

struct slot_info {
  std::string worker_id;
  std::string role;
  std::string endpoint;
  std::string engine_endpoint;
  std::string protocol;
  int rank = 0;
  bool alive = false;
  uint64_t prefill_tokens = 0;
  uint64_t decode_blocks = 0;
};

using steady = std::chrono::steady_clock;

// Blocks a rank will hold once the requests just routed there are
// prefilled: counted before their events arrive, so that a burst sharing a
// prefix is not scattered. Entries expire.
constexpr auto prediction_ttl = std::chrono::seconds{5};
constexpr size_t prediction_cap = 200000; // per rank

struct booking {
  uint32_t slot = 0;
  uint64_t prefill_tokens = 0;
  uint64_t decode_blocks = 0;
  bool prefilled = false;
};

struct router_state {
  router_state() = default;
  router_config cfg;
  uint32_t block_size = 0; // the first worker's; others must match
  indexer::prefix_index index{block_hash_seed};
  std::map<std::string, cluster::worker_record> workers;
  std::map<std::string, std::vector<uint32_t>> worker_slots;
  std::vector<slot_info> slots;
  std::vector<std::unordered_map<uint64_t, steady::time_point>> predicted;
  std::unordered_map<uint64_t, booking> bookings;
  uint64_t next_key = 1;
  uint64_t round_robin = 0;
  std::mt19937_64 rng{std::random_device{}()};
  static inline const char* name = "kv_router";

  runtime::counter& counter(const char* name, const char* help,
                            runtime::label_set labels = {}) {
    return runtime::global_metrics().get_counter(name, help, labels);
  }

  void set_load_gauges(uint32_t slot) {
    auto& s = slots[slot];
    runtime::label_set l{{"worker", s.worker_id},
                         {"rank", std::to_string(s.rank)}};
    auto& m = runtime::global_metrics();
    m.get_gauge("outrider_router_active_prefill_tokens",
                "Prompt tokens routed to a rank and not yet computed", l)
      .set(static_cast<double>(s.prefill_tokens));
    m.get_gauge("outrider_router_active_decode_blocks",
                "KV blocks held by requests routed to a rank", l)
      .set(static_cast<double>(s.decode_blocks));
  }

  void unbook(uint64_t key, bool finished) {
    auto i = bookings.find(key);
    if (i == bookings.end())
      return;
    auto& b = i->second;
    auto& s = slots[b.slot];
    if (!b.prefilled) {
      s.prefill_tokens -= std::min(s.prefill_tokens, b.prefill_tokens);
      b.prefilled = true;
    }
    if (finished) {
      s.decode_blocks -= std::min(s.decode_blocks, b.decode_blocks);
      auto slot = b.slot;
      bookings.erase(i);
      set_load_gauges(slot);
    } else {
      set_load_gauges(b.slot);
    }
  }
};

using self_ptr = kv_router_actor::stateful_pointer<router_state>;

void worker_gone(self_ptr self, const std::string& id) {
  auto& st = self->state;
  auto i = st.worker_slots.find(id);
  if (i == st.worker_slots.end())
    return;
  for (auto slot : i->second) {
    st.index.clear_slot(slot);
    st.slots[slot].alive = false;
    st.predicted[slot].clear();
  }
  std::erase_if(st.bookings, [&](const auto& kv) {
    return st.slots[kv.second.slot].worker_id == id;
  });
  st.worker_slots.erase(i);
  st.workers.erase(id);
  spdlog::info("router: worker {} left", id);
}

route_decision place(self_ptr self, const route_request& req) {
  auto& st = self->state;
  route_decision d;
  std::vector<candidate> cands;
  for (uint32_t s = 0; s < st.slots.size(); ++s) {
    const auto& info = st.slots[s];
    // "" means any worker that decodes: aggregated or decode.
    bool role_ok =
      req.role.empty() ? info.role != "prefill" : info.role == req.role;
    if (!info.alive || !role_ok ||
        std::find(req.exclude.begin(), req.exclude.end(), info.worker_id) !=
          req.exclude.end())
      continue;
    cands.push_back(candidate{s, 0, info.prefill_tokens, info.decode_blocks});
  }
  if (cands.empty()) {
    d.error = req.role.empty() ? "no worker is available"
                               : "no " + req.role + " worker is available";
    return d;
  }
  if (st.cfg.queue_threshold &&
      std::all_of(cands.begin(), cands.end(), [&](const candidate& c) {
        return static_cast<double>(c.active_prefill_tokens) >
               *st.cfg.queue_threshold;
      })) {
    d.busy = true;
    d.error = "every worker is above the queue threshold";
    return d;
  }
  auto bs = std::max(1u, st.block_size);
  auto prompt_blocks = static_cast<uint32_t>((req.tokens.size() + bs - 1) / bs);
  size_t pick = 0;
  auto seq = sequence_hashes(req.tokens.data(), req.tokens.size(), bs);
  // What the index knows, in every mode (the hit-rate metrics want it).
  std::unordered_map<uint32_t, uint32_t> overlap;
  for (auto o : st.index.find_matches(seq))
    overlap[o.slot] = o.blocks;
  if (st.cfg.mode == "round-robin") {
    pick = st.round_robin++ % cands.size();
  } else if (st.cfg.mode == "random") {
    pick = std::uniform_int_distribution<size_t>{0, cands.size() - 1}(st.rng);
  } else {
    auto now = steady::now();
    for (auto& c : cands) {
      c.overlap_blocks = overlap.count(c.slot) ? overlap[c.slot] : 0;
      // Predicted blocks extend what the index knows.
      const auto& pred = st.predicted[c.slot];
      uint32_t n = 0;
      while (n < seq.size()) {
        auto i = pred.find(seq[n]);
        if (i == pred.end() || i->second < now)
          break;
        ++n;
      }
      c.overlap_blocks = std::max(c.overlap_blocks, n);
    }
    auto cfg = st.cfg.selector;
    cfg.block_size = bs;
    auto sel = select_worker(cands, prompt_blocks, cfg, st.rng);
    for (size_t i = 0; i < cands.size(); ++i)
      if (cands[i].slot == sel->slot)
        pick = i;
  }
  auto slot = cands[pick].slot;
  uint32_t overlap_blocks = overlap.count(slot) ? overlap[slot] : 0;
  auto& info = st.slots[slot];
  if (st.cfg.mode == "kv") {
    auto& pred = st.predicted[slot];
    auto expiry = steady::now() + prediction_ttl;
    if (pred.size() + seq.size() > prediction_cap)
      std::erase_if(pred, [now = steady::now()](const auto& kv) {
        return kv.second < now;
      });
    if (pred.size() + seq.size() <= prediction_cap)
      for (auto h : seq)
        pred[h] = expiry;
  }
  d.queued_prefill_tokens = info.prefill_tokens;
  d.held_decode_blocks = info.decode_blocks;
  d.block_size = bs;
  booking b;
  b.slot = slot;
  b.prefill_tokens =
    req.tokens.size() -
    std::min<size_t>(req.tokens.size(), size_t{overlap_blocks} * bs);
  b.decode_blocks = prompt_blocks - std::min(prompt_blocks, overlap_blocks);
  info.prefill_tokens += b.prefill_tokens;
  info.decode_blocks += b.decode_blocks;
  d.ok = true;
  d.key = st.next_key++;
  st.bookings[d.key] = b;
  st.set_load_gauges(slot);
  d.worker_id = info.worker_id;
  d.endpoint = info.endpoint;
  d.engine_endpoint = info.engine_endpoint;
  d.protocol = info.protocol;
  d.rank = info.rank;
  d.overlap_blocks = overlap_blocks;
  d.prompt_blocks = static_cast<uint32_t>(seq.size());
  st.counter("outrider_router_decisions_total", "Requests placed, by mode",
             {{"mode", st.cfg.mode}})
    .inc();
  st.counter("outrider_router_prompt_blocks_total",
             "Full prompt blocks of placed requests")
    .inc(seq.size());
  st.counter("outrider_router_cached_blocks_total",
             "Of those, blocks the chosen rank already held")
    .inc(overlap_blocks);
  return d;
}

kv_router_actor::behavior_type kv_router(self_ptr self, router_config cfg) {
  self->state.cfg = std::move(cfg);
  return {
    [=](worker_up_atom, const cluster::worker_record& r) {
      auto& st = self->state;
      if (!st.cfg.model.empty() && r.model != st.cfg.model) {
        st.counter("outrider_router_workers_refused_total",
                   "Workers refused (model or block size differs)")
          .inc();
        spdlog::warn("router: worker {} serves '{}', not '{}': refused",
                     r.worker_id, r.model, st.cfg.model);
        return;
      }
      if (st.block_size == 0)
        st.block_size = r.kv_block_size;
      if (r.kv_block_size != st.block_size) {
        st.counter("outrider_router_workers_refused_total",
                   "Workers refused (model or block size differs)")
          .inc();
        spdlog::warn("router: worker {} has block size {}, not {}: refused",
                     r.worker_id, r.kv_block_size, st.block_size);
        return;
      }
      auto known = st.workers.find(r.worker_id);
      if (known != st.workers.end()) {
        if (known->second.instance_id == r.instance_id &&
            known->second.relay_endpoint == r.relay_endpoint)
          return;
        worker_gone(self, r.worker_id);
      }
      st.workers[r.worker_id] = r;
      auto& slots = st.worker_slots[r.worker_id];
      for (uint32_t rank = 0; rank < r.data_parallel_size; ++rank) {
        slots.push_back(static_cast<uint32_t>(st.slots.size()));
        st.predicted.emplace_back();
        st.slots.push_back(slot_info{r.worker_id, r.role, r.relay_endpoint,
                                     r.engine_endpoint, r.protocol,
                                     static_cast<int>(rank), true, 0, 0});
      }
      spdlog::info("router: worker {} ({} rank(s), {}) joined", r.worker_id,
                   r.data_parallel_size, r.relay_endpoint);
    },
    [=](worker_down_atom, const std::string& id) { worker_gone(self, id); },
    [=](kv_events_atom, const std::shared_ptr<const worker_events>& ev) {
      auto& st = self->state;
      auto i = st.worker_slots.find(ev->worker_id);
      if (i == st.worker_slots.end() || ev->rank < 0 ||
          static_cast<size_t>(ev->rank) >= i->second.size()) {
        st.counter("outrider_router_events_dropped_total",
                   "KV events of unknown workers or ranks")
          .inc();
        return;
      }
      auto slot = i->second[static_cast<size_t>(ev->rank)];
      if (ev->reset)
        st.index.clear_slot(slot);
      st.index.apply(slot, ev->events);
      runtime::global_metrics()
        .get_gauge("outrider_router_index_entries",
                   "(rank, block) entries in the router's index")
        .set(static_cast<double>(st.index.entries()));
    },
    [=](place_atom, const std::shared_ptr<const route_request>& req) {
      return place(self, *req);
    },
    [=](prefilled_atom, uint64_t key) { self->state.unbook(key, false); },
    [=](release_atom, uint64_t key) { self->state.unbook(key, true); },
  };
}

} // namespace

kv_router_actor spawn_kv_router(caf::actor_system& sys, router_config cfg) {
  return sys.spawn(kv_router, std::move(cfg));
}

} // namespace outrider::router
