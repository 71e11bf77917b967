#include "actors/router/kv_router.hpp"

#include <random>

#include <nlohmann/json.hpp>

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
  struct load_gauges {
    runtime::gauge* prefill = nullptr;
    runtime::gauge* decode = nullptr;
  };
  std::vector<load_gauges> per_slot;
  runtime::gauge* workers = nullptr;

  static router_stats make(const std::string& mode) {
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
                                 "Requests placed, by mode", {{"mode", mode}});
    s.prompt_blocks = &m.get_counter("outrider_router_prompt_blocks_total",
                                     "Full prompt blocks of placed requests");
    s.cached_blocks =
      &m.get_counter("outrider_router_cached_blocks_total",
                     "Of those, blocks the chosen rank already held");
    return s;
  }

  void show_load(const placement& p, uint32_t slot) {
    while (per_slot.size() < p.slots()) {
      auto l = p.load(static_cast<uint32_t>(per_slot.size()));
      runtime::label_set labels{{"worker", l.worker_id},
                                {"rank", std::to_string(l.rank)}};
      auto& m = runtime::global_metrics();
      per_slot.push_back(
        {&m.get_gauge("outrider_router_active_prefill_tokens",
                      "Prompt tokens routed to a rank and not yet computed",
                      labels),
         &m.get_gauge("outrider_router_active_decode_blocks",
                      "KV blocks held by requests routed to a rank", labels)});
    }
    auto l = p.load(slot);
    per_slot[slot].prefill->set(static_cast<double>(l.prefill_tokens));
    per_slot[slot].decode->set(static_cast<double>(l.decode_blocks));
  }
};

struct router_state {
  router_state() = default;
  std::unique_ptr<placement> core;
  router_stats stats;
  static inline const char* name = "kv_router";
};

using self_ptr = kv_router_actor::stateful_pointer<router_state>;

kv_router_actor::behavior_type kv_router(self_ptr self, router_config cfg) {
  auto& st = self->state;
  st.stats = router_stats::make(cfg.mode);
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
      st.stats.workers->set(static_cast<double>(st.core->workers()));
    },
    [=](worker_down_atom, const std::string& id) {
      auto& st = self->state;
      st.core->remove_worker(id);
      st.stats.workers->set(static_cast<double>(st.core->workers()));
    },
    [=](kv_events_atom, const std::shared_ptr<const worker_events>& ev) {
      auto& st = self->state;
      if (!st.core->apply_events(*ev)) {
        st.stats.events_dropped->inc();
        return;
      }
      st.stats.index_entries->set(
        static_cast<double>(st.core->index_entries()));
    },
    [=](place_atom, const std::shared_ptr<const route_request>& req) {
      auto& st = self->state;
      auto d = st.core->place(*req);
      if (d.ok) {
        st.stats.show_load(*st.core, d.slot);
        st.stats.decisions->inc();
        st.stats.prompt_blocks->inc(d.prompt_blocks);
        st.stats.cached_blocks->inc(d.overlap_blocks);
      }
      return d;
    },
    [=](prefilled_atom, uint64_t key) {
      auto& st = self->state;
      if (auto slot = st.core->prefilled(key))
        st.stats.show_load(*st.core, *slot);
    },
    [=](release_atom, uint64_t key) {
      auto& st = self->state;
      if (auto slot = st.core->release(key))
        st.stats.show_load(*st.core, *slot);
    },
    [=](index_atom) {
      nlohmann::json doc;
      auto& workers = doc["workers"] = nlohmann::json::object();
      for (const auto& [id, ranks] : self->state.core->held_blocks())
        for (const auto& [rank, blocks] : ranks)
          workers[id][std::to_string(rank)] = blocks;
      return doc.dump();
    },
  };
}

} // namespace

kv_router_actor spawn_kv_router(caf::actor_system& sys, router_config cfg) {
  return sys.spawn(kv_router, std::move(cfg));
}

} // namespace outrider::router
