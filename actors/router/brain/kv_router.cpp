#include "actors/router/brain/kv_router.hpp"

#include <algorithm>
#include <chrono>
#include <memory>
#include <random>

#include <nlohmann/json.hpp>

#include "actors/router/brain/decision_log.hpp"
#include "runtime/metrics.hpp"

namespace outrider::router {

namespace {

// Metric handles, built once (per slot for the load gauges).
struct router_stats {
  runtime::counter* refused = nullptr;
  runtime::counter* events_dropped = nullptr;
  runtime::gauge* index_entries = nullptr;
  runtime::counter* decisions = nullptr;
  runtime::counter* prompt_blocks = nullptr;
  runtime::counter* cached_blocks = nullptr;
  // The decision itself (placement::place on the actor's thread), and how
  // long a KV batch took from its publisher to the index.
  runtime::histogram* decision_seconds = nullptr;
  runtime::histogram* event_lag = nullptr;
  runtime::histogram* event_wait = nullptr;
  struct load_gauges {
    runtime::gauge* prefill = nullptr;
    runtime::gauge* decode = nullptr;
    runtime::counter* placed = nullptr;
    runtime::gauge* blocks = nullptr;
  };
  std::vector<load_gauges> per_slot;
  // Series labelled by worker and rank, for the first `max_slot_series`
  // (worker, rank) pairs a router meets (worker ids come from discovery:
  // outside outrider's control; --metrics-worker-series-cap); later ones
  // keep unexported ones of their own (the status page still reads them),
  // counted as capped.
  size_t max_slot_series = 4096;
  std::vector<std::unique_ptr<runtime::gauge>> private_gauges;
  std::vector<std::unique_ptr<runtime::counter>> private_counters;
  runtime::counter* capped = nullptr;
  runtime::gauge* workers = nullptr;
  // What the index left out or dropped, by reason (see show_index).
  struct skipped_counter {
    runtime::counter* c = nullptr;
    uint64_t seen = 0;
    void to(uint64_t v) {
      if (v > seen)
        c->inc(v - seen);
      seen = v;
    }
  };
  skipped_counter unknown_parent, unknown_removal, evicted, unresolved,
    other_groups, not_credited;

  static router_stats make(engine::router_mode mode) {
    auto& m = runtime::global_metrics();
    router_stats s;
    s.refused = &m.get_counter("outrider_router_workers_refused_total",
                               "Workers refused (model or block size differs)");
    s.events_dropped = &m.get_counter("outrider_router_events_dropped_total",
                                      "KV events of unknown workers or ranks");
    s.workers = &m.get_gauge("outrider_router_workers",
                             "Workers the router can place requests on");
    s.index_entries =
      &m.get_gauge("outrider_router_index_entries",
                   "(rank, block) entries in the router's index");
    s.decisions = &m.get_counter("outrider_router_decisions_total",
                                 "Requests placed, by mode",
                                 {{"mode", engine::to_string(mode)}});
    s.prompt_blocks = &m.get_counter("outrider_router_prompt_blocks_total",
                                     "Full prompt blocks of placed requests");
    s.cached_blocks =
      &m.get_counter("outrider_router_cached_blocks_total",
                     "Of those, blocks the chosen rank already held");
    s.decision_seconds = &m.get_histogram(
      "outrider_router_decision_seconds",
      "Time to place one request (match and select, on the router actor)",
      {1e-6, 2e-6, 5e-6, 1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3,
       1e-2});
    s.event_lag = &m.get_histogram(
      "outrider_router_kv_event_lag_seconds",
      "From a KV batch's publisher (its timestamp) to the router's index",
      {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5,
       5, 10});
    s.event_wait = &m.get_histogram(
      "outrider_router_kv_event_wait_seconds",
      "From a KV batch's arrival at the router (read from its stream) to "
      "the router's index: the part of the lag spent waiting for the "
      "router actor",
      {0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
       1, 2.5, 5, 10});
    auto skipped = [&](const char* reason) {
      return skipped_counter{
        &m.get_counter("outrider_router_index_skipped_blocks_total",
                       "Blocks of KV events the router's index left out or "
                       "dropped, by reason",
                       {{"reason", reason}})};
    };
    s.unknown_parent = skipped("unknown_parent");
    s.unknown_removal = skipped("unknown_removal");
    s.evicted = skipped("over_cap");
    s.unresolved = skipped("unresolved_placeholder");
    s.other_groups = skipped("non_prefix_group");
    s.not_credited = skipped("remote_or_foreign");
    return s;
  }

  void show_index(const indexer::tiered_index& idx) {
    auto t = idx.tier_stats();
    unknown_parent.to(t.unknown_parent);
    unknown_removal.to(t.unknown_removal);
    evicted.to(t.evicted);
    const auto& st = idx.stats();
    unresolved.to(st.placeholders_unresolved);
    other_groups.to(st.other_groups);
    not_credited.to(st.not_credited);
  }

  void show_load(const placement& p, uint32_t slot) {
    while (per_slot.size() < p.slots()) {
      auto l = p.load(static_cast<uint32_t>(per_slot.size()));
      runtime::label_set labels{{"worker", l.worker_id},
                                {"rank", std::to_string(l.rank)}};
      auto& m = runtime::global_metrics();
      if (per_slot.size() >= max_slot_series) {
        if (!capped)
          capped = &m.get_counter(
            "outrider_metrics_capped_total",
            "Series not exported because a label's values reached their "
            "cap (worker: --metrics-worker-series-cap worker ranks a "
            "router met)",
            {{"label", "worker"}});
        capped->inc();
        auto gauge = [&] {
          private_gauges.push_back(std::make_unique<runtime::gauge>());
          return private_gauges.back().get();
        };
        private_counters.push_back(std::make_unique<runtime::counter>());
        per_slot.push_back(
          {gauge(), gauge(), private_counters.back().get(), gauge()});
        continue;
      }
      per_slot.push_back(
        {&m.get_gauge("outrider_router_active_prefill_tokens",
                      "Prompt tokens routed to a rank and not yet computed",
                      labels),
         &m.get_gauge("outrider_router_active_decode_blocks",
                      "KV blocks held by requests routed to a rank", labels),
         &m.get_counter("outrider_router_placed_total",
                        "Requests this router placed on a rank", labels),
         // Beside the sidecar's outrider_index_blocks{rank}: the two part
         // when events are lost between them (alert on the difference).
         &m.get_gauge("outrider_router_index_blocks",
                      "GPU blocks the router's index holds for a rank",
                      labels)});
    }
    auto l = p.load(slot);
    per_slot[slot].prefill->set(static_cast<double>(l.prefill_tokens));
    per_slot[slot].decode->set(static_cast<double>(l.decode_blocks));
    per_slot[slot].blocks->set(static_cast<double>(p.index().held(slot)));
  }
};

// How long a router may be silent before its bookings are forgotten.
constexpr auto router_silence = std::chrono::seconds{5};
constexpr auto tick_every = std::chrono::seconds{1};
// Old table slots a tick moves per table of the index (placement::tidy):
// a table of 8 M slots left half-moved by events that stopped is moved in
// four minutes, each tick's share (entries placed at random in the new
// arrays, a cache miss each) well under a millisecond.
constexpr size_t tidy_budget = 16384;

struct router_state {
  router_state() = default;
  std::unique_ptr<placement> core;
  router_stats stats;
  decision_log decisions;
  engine::router_mode mode = engine::router_mode::kv;
  booking_share share;
  workers_fn on_workers;
  void workers_changed() {
    stats.workers->set(static_cast<double>(core->workers()));
    if (on_workers)
      on_workers(core->workers());
  }
  static inline const char* name = "kv_router";
};

using self_ptr = kv_router_actor::stateful_pointer<router_state>;

using note_op = cluster::booking_note::op;

// Tells the other routers (best effort).
void tell(self_ptr self, note_op what, uint64_t key,
          const route_request* req = nullptr) {
  auto& st = self->state;
  if (!st.share.bus)
    return;
  cluster::booking_note n;
  if (what == note_op::add) {
    auto found = st.core->note_of(key);
    if (!found)
      return;
    n = std::move(*found);
    if (req && req->tokens.size() <= cluster::max_note_blocks * 16)
      n.blocks = st.core->sequence_of(*req);
    if (req && req->session.size() <= cluster::max_note_session_bytes)
      n.session = req->session;
  }
  n.what = what;
  n.key = key;
  n.router_id = st.share.router_id;
  st.share.bus->publish(n);
}

std::string status_json(router_state& st) {
  nlohmann::json doc{{"mode", engine::to_string(st.mode)}};
  const auto& cfg = st.core->config();
  doc["settings"] = {
    {"kv_overlap_score_weight", cfg.selector.overlap_score_weight},
    {"kv_decode_weight", cfg.selector.decode_weight},
    {"kv_queue_weight", cfg.selector.queue_weight},
    {"kv_evict_weight", cfg.selector.evict_weight},
    {"router_temperature", cfg.selector.temperature},
    {"kv_priority_overlap", cfg.priority_overlap},
    {"router_queue_threshold", cfg.queue_threshold
                                 ? nlohmann::json(*cfg.queue_threshold)
                                 : nlohmann::json()},
    {"router_queue_kv_share", cfg.queue_kv_share}};
  auto& workers = doc["workers"] = nlohmann::json::array();
  for (const auto& v : st.core->view()) {
    if (workers.empty() || workers.back()["id"] != v.worker_id)
      workers.push_back({{"id", v.worker_id},
                         {"role", engine::to_string(v.role)},
                         {"ranks", nlohmann::json::array()}});
    workers.back()["ranks"].push_back(
      {{"rank", v.rank},
       {"active_prefill_tokens", v.prefill_tokens},
       {"active_decode_blocks", v.decode_blocks},
       {"blocks_held", v.blocks_held},
       {"engine_used_kv_blocks", v.engine_used_kv_blocks},
       {"engine_total_kv_blocks", v.engine_total_kv_blocks},
       {"placed", v.slot < st.stats.per_slot.size()
                    ? st.stats.per_slot[v.slot].placed->value()
                    : 0}});
  }
  doc["decisions"] = st.decisions.recent();
  return doc.dump();
}

kv_router_actor::behavior_type kv_router(self_ptr self, router_config cfg,
                                         booking_share share,
                                         workers_fn on_workers) {
  auto& st = self->state;
  st.stats = router_stats::make(cfg.mode);
  st.stats.max_slot_series = cfg.worker_series_cap;
  st.mode = cfg.mode;
  st.share = std::move(share);
  st.on_workers = std::move(on_workers);
  if (st.share.bus)
    self->send(self, tick_atom::value);
  st.core = std::make_unique<placement>(
    std::move(cfg), [] { return placement::clock::now(); },
    std::random_device{}());
  return {
    [=](worker_up_atom, const cluster::worker_record& r) {
      auto& st = self->state;
      auto j = st.core->add_worker(r);
      if (j == placement::join::refused_model ||
          j == placement::join::refused_block_size)
        st.stats.refused->inc();
      st.workers_changed();
    },
    [=](worker_down_atom, const std::string& id) {
      auto& st = self->state;
      st.core->remove_worker(id);
      st.workers_changed();
    },
    [=](kv_events_atom, const std::shared_ptr<const worker_events>& ev) {
      auto& st = self->state;
      auto slot = st.core->apply_events(*ev);
      if (!slot) {
        st.stats.events_dropped->inc();
        return;
      }
      if (ev->sent_unix_nanos > 0) {
        auto now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count();
        // Clocks of other hosts may run ahead: a negative lag counts as 0.
        st.stats.event_lag->observe(
          static_cast<double>(std::max<int64_t>(
            0, now - static_cast<int64_t>(ev->sent_unix_nanos))) /
          1e9);
      }
      if (ev->received != std::chrono::steady_clock::time_point{})
        st.stats.event_wait->observe(
          std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                        ev->received)
            .count());
      st.stats.show_load(*st.core, *slot);
      st.stats.index_entries->set(
        static_cast<double>(st.core->index_entries()));
      st.stats.show_index(st.core->index());
    },
    [=](place_atom, const std::shared_ptr<const route_request>& req) {
      auto& st = self->state;
      auto t0 = std::chrono::steady_clock::now();
      auto d = st.core->place(*req);
      st.stats.decision_seconds->observe(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count());
      if (d.ok) {
        tell(self, note_op::add, d.key, req.get());
        st.stats.show_load(*st.core, d.slot);
        st.stats.per_slot[d.slot].placed->inc();
        st.stats.decisions->inc();
        st.stats.prompt_blocks->inc(d.prompt_blocks);
        st.stats.cached_blocks->inc(d.overlap_blocks);
        if (!d.session_outcome.empty())
          runtime::global_metrics()
            .get_counter("outrider_router_session_decisions_total",
                         "Session affinity: a session's request back to its "
                         "worker (kept), away from it (moved, soft mode) "
                         "or with none remembered (new)",
                         {{"outcome", d.session_outcome}})
            .inc();
        st.decisions.record(d);
      }
      return d;
    },
    [=](prefilled_atom, uint64_t key) {
      auto& st = self->state;
      if (auto slot = st.core->prefilled(key)) {
        tell(self, note_op::prefilled, key);
        st.stats.show_load(*st.core, *slot);
      }
    },
    [=](release_atom, uint64_t key) {
      auto& st = self->state;
      if (auto slot = st.core->release(key)) {
        tell(self, note_op::release, key);
        st.stats.show_load(*st.core, *slot);
      }
    },
    [=](booking_atom, const std::shared_ptr<const cluster::booking_note>& n) {
      auto& st = self->state;
      if (n->router_id == st.share.router_id)
        return; // our own, back from NATS
      if (auto slot = st.core->remote(*n))
        st.stats.show_load(*st.core, *slot);
    },
    [=](tick_atom) {
      auto& st = self->state;
      tell(self, note_op::alive, 0);
      st.core->expire_remote(placement::clock::now() - router_silence);
      st.core->tidy(tidy_budget);
      for (uint32_t s = 0; s < st.core->slots(); ++s)
        st.stats.show_load(*st.core, s);
      self->delayed_send(self, tick_every, tick_atom::value);
    },
    [=](index_atom) {
      nlohmann::json doc;
      auto& workers = doc["workers"] = nlohmann::json::object();
      for (const auto& [id, ranks] : self->state.core->held_blocks())
        for (const auto& [rank, blocks] : ranks)
          workers[id][std::to_string(rank)] = blocks;
      return doc.dump();
    },
    [=](status_atom) { return status_json(self->state); },
    [=](engine_load_atom, const std::shared_ptr<const engine_load>& l) {
      self->state.core->engine_reported(*l);
    },
    [=](retune_atom, const std::shared_ptr<const router_config>& next) {
      self->state.core->retune(*next);
    },
  };
}

} // namespace

kv_router_actor spawn_kv_router(caf::actor_system& sys, router_config cfg,
                                booking_share share, workers_fn on_workers) {
  return sys.spawn(kv_router, std::move(cfg), std::move(share),
                   std::move(on_workers));
}

} // namespace outrider::router
