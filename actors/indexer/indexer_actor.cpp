#include "actors/indexer/indexer_actor.hpp"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "actors/indexer/index_store.hpp"
#include "runtime/metrics.hpp"

namespace outrider::indexer {

namespace {

constexpr uint64_t compaction_interval = 10000; // batches per rank

struct indexer_state {
  indexer_state() = default;
  indexer_config cfg;
  index_store store;
  local_index index;
  std::string instance_id;
  std::map<int, uint64_t> next_seq;
  std::map<int, uint64_t> since_compaction;
  runtime::counter* batches = nullptr;
  runtime::counter* stale = nullptr;
  static inline const char* name = "indexer";
};

using self_ptr = indexer_actor::stateful_pointer<indexer_state>;

void count(const apply_stats& st) {
  auto& m = runtime::global_metrics();
  auto add = [&](const char* what, size_t n) {
    if (n > 0)
      m.get_counter("outrider_kv_blocks_applied_total",
                    "Block events applied to the local index, by kind",
                    {{"kind", what}})
        .inc(n);
  };
  add("stored", st.stored);
  add("removed", st.removed);
  add("cleared", st.cleared);
  add("unknown_parent", st.unknown_parent);
  add("unknown_removal", st.unknown_removal);
}

void publish_gauges(self_ptr self) {
  auto& m = runtime::global_metrics();
  for (const auto& [rank, blocks] : self->state.index.ranks())
    m.get_gauge("outrider_index_blocks", "Blocks in the local index",
                {{"rank", std::to_string(rank)}})
      .set(static_cast<double>(blocks.size()));
}

void tell_cleared(self_ptr self, int rank) {
  if (!self->state.cfg.listener)
    return;
  kv_batch b;
  b.rank = rank;
  b.seq = self->state.next_seq[rank];
  b.events.push_back(kv::all_blocks_cleared{});
  self->state.cfg.listener->on_batch(b);
}

indexer_actor::behavior_type behavior(self_ptr self);

indexer_actor::behavior_type indexer(self_ptr self, indexer_config cfg) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  if (auto err = st.store.open(st.cfg.data_dir)) {
    // The supervisor restarts us with backoff and gives up eventually.
    spdlog::error("indexer: cannot open {}: {}", st.cfg.data_dir,
                  describe(err));
    self->quit(std::move(err));
    return behavior(self);
  }
  auto rec = st.store.load();
  st.instance_id = rec.instance_id;
  st.next_seq = rec.next_seq;
  st.index = std::move(rec.index);
  spdlog::info("indexer: recovered {} blocks of instance '{}' from {}",
               st.index.total_blocks(), st.instance_id, st.cfg.data_dir);
  publish_gauges(self);
  auto& m = runtime::global_metrics();
  st.batches = &m.get_counter("outrider_kv_batches_applied_total",
                              "KV event batches applied and persisted");
  st.stale = &m.get_counter("outrider_kv_batches_out_of_order_total",
                            "Batches refused because of their sequence");
  return behavior(self);
}

indexer_actor::behavior_type behavior(self_ptr self) {
  return {
    [=](apply_atom, const std::shared_ptr<const kv_batch>& b) {
      auto& st = self->state;
      auto expected = st.next_seq[b->rank];
      if (b->seq != expected) {
        st.stale->inc();
        if (auto sender = caf::actor_cast<caf::actor>(self->current_sender()))
          caf::anon_send(sender, resync_atom::value, int32_t{b->rank},
                         expected);
        return;
      }
      if (auto err = st.store.apply(b->rank, b->seq + 1, b->events)) {
        // Not applied: the forwarder will offer it again after a resync.
        spdlog::error("indexer: {}", describe(err));
        return;
      }
      st.next_seq[b->rank] = b->seq + 1;
      count(st.index.apply(b->rank, b->events));
      // Fold the log into a snapshot now and then; recovery stays short.
      if (++st.since_compaction[b->rank] >= compaction_interval) {
        st.since_compaction[b->rank] = 0;
        if (auto err = st.store.compact(b->rank, st.index.ranks().at(b->rank),
                                        b->seq + 1))
          spdlog::error("indexer: {}", describe(err));
      }
      st.batches->inc();
      if (st.cfg.listener)
        st.cfg.listener->on_batch(*b);
      publish_gauges(self);
    },
    [=](instance_atom, const std::string& id) {
      auto& st = self->state;
      if (id == st.instance_id)
        return true;
      spdlog::info("indexer: engine instance '{}' replaces '{}': index reset",
                   id, st.instance_id);
      std::vector<int> ranks;
      for (const auto& [r, _] : st.index.ranks())
        ranks.push_back(r);
      if (auto err = st.store.reset(id))
        spdlog::error("indexer: {}", describe(err));
      st.index.clear();
      st.next_seq.clear();
      st.instance_id = id;
      for (auto r : ranks)
        tell_cleared(self, r);
      publish_gauges(self);
      return false;
    },
    [=](next_seq_atom, int32_t rank) { return self->state.next_seq[rank]; },
    [=](reset_rank_atom, int32_t rank, uint64_t next) {
      auto& st = self->state;
      spdlog::warn("indexer: rank {} reset; continuing at sequence {}", rank,
                   next);
      if (auto err = st.store.reset_rank(rank, next))
        spdlog::error("indexer: {}", describe(err));
      st.index.clear_rank(rank);
      st.next_seq[rank] = next;
      tell_cleared(self, rank);
      publish_gauges(self);
    },
    [=](blocks_atom) {
      return static_cast<uint64_t>(self->state.index.total_blocks());
    },
    [=](subscribe_atom, const snapshot_callback& cb) {
      const auto& st = self->state;
      std::vector<std::shared_ptr<const kv_batch>> snap;
      for (const auto& [rank, blocks] : st.index.ranks()) {
        auto b = std::make_shared<kv_batch>();
        b->rank = rank;
        auto next = st.next_seq.count(rank) ? st.next_seq.at(rank) : 0;
        b->seq = next > 0 ? next - 1 : 0;
        b->events = st.index.snapshot_events(rank);
        snap.push_back(std::move(b));
      }
      cb(std::move(snap));
      return true;
    },
    [=](snapshot_atom) {
      const auto& st = self->state;
      nlohmann::json doc;
      doc["instance_id"] = st.instance_id;
      auto& ranks = doc["ranks"] = nlohmann::json::object();
      for (const auto& [rank, blocks] : st.index.ranks()) {
        auto& r = ranks[std::to_string(rank)];
        r["next_seq"] = st.next_seq.count(rank) ? st.next_seq.at(rank) : 0;
        auto& list = r["blocks"] = nlohmann::json::array();
        for (const auto& [hash, info] : blocks)
          list.push_back({{"hash", hash},
                          {"parent", info.parent ? nlohmann::json(*info.parent)
                                                 : nlohmann::json()},
                          {"token_ids", info.token_ids}});
      }
      return doc.dump();
    },
  };
}

} // namespace

indexer_actor spawn_indexer(caf::actor_system& sys, indexer_config cfg) {
  return sys.spawn(indexer, std::move(cfg));
}

} // namespace outrider::indexer
