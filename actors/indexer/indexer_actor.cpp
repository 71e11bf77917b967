#include "actors/indexer/indexer_actor.hpp"

#include <algorithm>
#include <chrono>
#include <optional>
#include <variant>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "actors/indexer/index_store.hpp"
#include "actors/indexer/indexer_stats.hpp"
#include "actors/indexer/tier_bound.hpp"
#include "runtime/metrics.hpp"

namespace outrider::indexer {

namespace {

constexpr uint64_t compaction_interval = 10000; // batches per rank
constexpr uint64_t compaction_min_events = 65536;

// A rank whose batch the store could not write: later batches are held
// back (no resync each: that was a replay storm) until a retry, backing off
// 0.5 s to 30 s, resumes the store and asks the forwarder once to resync.
struct stalled_rank {
  caf::actor forwarder;
  std::chrono::milliseconds backoff{500};
  bool retry_scheduled = false;
};

struct last_resync {
  uint64_t expected = 0;
  std::chrono::steady_clock::time_point at{};
};

struct indexer_state {
  indexer_state() = default;
  indexer_config cfg;
  index_store store;
  local_index index;
  std::optional<tier_bound> bound; // made with the config
  std::string instance_id;
  std::map<int, uint64_t> next_seq;
  std::map<int, uint64_t> since_compaction;
  std::map<int, uint64_t> events_since_compaction;
  std::map<int, stalled_rank> stalled;
  std::map<int, last_resync> resyncs;
  std::string store_error; // the last failed write's, while any rank stalls
  indexer_stats stats = indexer_stats::make();
  static inline const char* name = "indexer";
};

using self_ptr = indexer_actor::stateful_pointer<indexer_state>;

void publish_gauges(self_ptr self) {
  auto& st = self->state;
  for (const auto& [rank, blocks] : st.index.ranks())
    st.stats.blocks_of(rank).set(static_cast<double>(blocks.size()));
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

// Logs and counts what the store found and repaired.
runtime::counter& corruption(const std::string& kind) {
  return runtime::global_metrics().get_counter(
    "outrider_index_corruption_total",
    "Damage found in the sidecar's store and repaired, by kind (wal: log cut "
    "at its last good record; store: moved aside, started empty; record: a "
    "rank reset)",
    {{"kind", kind}});
}

void report_store_notes(index_store& store) {
  // Every kind shows (at 0) from the start: alerts read it.
  for (const char* kind : {"wal", "store", "record"})
    corruption(kind);
  for (auto& n : store.take_notes()) {
    corruption(n.kind).inc();
    spdlog::error("indexer: {}", n.message);
  }
}

indexer_actor::behavior_type indexer(self_ptr self, indexer_config cfg) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  auto opened = st.store.open(st.cfg.data_dir);
  report_store_notes(st.store);
  if (opened) {
    // Not even a new store could be made (permissions, a full disk): the
    // supervisor restarts us with backoff and gives up eventually.
    spdlog::error("indexer: cannot open {}: {}", st.cfg.data_dir,
                  describe(opened));
    self->quit(std::move(opened));
    return behavior(self);
  }
  auto rec = st.store.load();
  report_store_notes(st.store);
  st.instance_id = rec.instance_id;
  st.next_seq = rec.next_seq;
  st.index = std::move(rec.index);
  st.bound.emplace(st.cfg.tier_cap);
  for (const auto& [rank, _] : st.index.ranks())
    st.bound->rebuild(st.index, rank);
  if (rec.rebuilt)
    spdlog::warn("indexer: the store was rebuilt; every rank of instance "
                 "'{}' starts again from sequence 0",
                 st.instance_id);
  spdlog::info("indexer: recovered {} blocks of instance '{}' from {}{}",
               st.index.total_blocks(), st.instance_id, st.cfg.data_dir,
               rec.corrupt_ranks.empty()
                 ? ""
                 : " (" + std::to_string(rec.corrupt_ranks.size()) +
                     " damaged rank(s) reset)");
  publish_gauges(self);
  return behavior(self);
}

// The store failed to write a batch of `rank`: held back until a retry.
void stall(self_ptr self, int rank, const caf::error& err) {
  auto& st = self->state;
  st.stats.store_errors->inc();
  bool first = st.stalled.empty();
  auto& s = st.stalled[rank];
  if (auto sender = caf::actor_cast<caf::actor>(self->current_sender()))
    s.forwarder = sender;
  st.store_error = describe(err);
  if (first) {
    spdlog::error("indexer: the store cannot write ({}); batches are held "
                  "back and the worker withdrawn until it can",
                  st.store_error);
    st.stats.store_failing->set(1);
    if (st.cfg.on_store)
      st.cfg.on_store(false, st.store_error);
  }
  if (!s.retry_scheduled) {
    s.retry_scheduled = true;
    self->delayed_send(self, s.backoff, retry_store_atom::value, int32_t{rank});
  }
}

void unstall(self_ptr self, int rank) {
  auto& st = self->state;
  if (!st.stalled.erase(rank) || !st.stalled.empty())
    return;
  spdlog::info("indexer: the store writes again");
  st.store_error.clear();
  st.stats.store_failing->set(0);
  if (st.cfg.on_store)
    st.cfg.on_store(true, {});
}

void on_retry_store(self_ptr self, int rank) {
  auto& st = self->state;
  auto it = st.stalled.find(rank);
  if (it == st.stalled.end())
    return;
  auto& s = it->second;
  s.retry_scheduled = false;
  if (auto err = st.store.resume()) {
    s.backoff = std::min(s.backoff * 2, std::chrono::milliseconds{30000});
    spdlog::warn("indexer: the store is still failing ({}); next try in {} ms",
                 describe(err), s.backoff.count());
    s.retry_scheduled = true;
    self->delayed_send(self, s.backoff, retry_store_atom::value, int32_t{rank});
    return;
  }
  // Ask the forwarder once for the batches from the one not written; a
  // failure to write them again stalls the rank again, backing off more.
  s.backoff = std::min(s.backoff * 2, std::chrono::milliseconds{30000});
  if (s.forwarder)
    caf::anon_send(s.forwarder, resync_atom::value, int32_t{rank},
                   st.next_seq[rank]);
}

void on_apply(self_ptr self, const kv_batch& b) {
  auto& st = self->state;
  auto expected = st.next_seq[b.rank];
  if (b.seq != expected) {
    st.stats.stale->inc();
    // One resync per retry while the store fails, and the same resync not
    // asked twice within a second: each refused batch asking its own made
    // a replay storm.
    auto now = std::chrono::steady_clock::now();
    auto& last = st.resyncs[b.rank];
    if (st.stalled.count(b.rank) || (last.expected == expected &&
                                     now - last.at < std::chrono::seconds{1})) {
      st.stats.held_back->inc();
      return;
    }
    last = {expected, now};
    if (auto sender = caf::actor_cast<caf::actor>(self->current_sender()))
      caf::anon_send(sender, resync_atom::value, int32_t{b.rank}, expected);
    return;
  }
  // What cannot change the index is never written: the log grows with
  // what the index holds, not with an engine's churn of unknown blocks.
  size_t noops = 0;
  auto pruned = st.index.without_noops(b.rank, b.events, &noops);
  // An offload tier past its cap: the oldest blocks' removals go with the
  // batch (logged, applied and forwarded as the engine's own).
  auto evicted =
    st.bound->evictions(st.index, b.rank, pruned ? *pruned : b.events);
  if (!evicted.empty()) {
    if (!pruned)
      pruned = b.events;
    pruned->insert(pruned->end(), evicted.begin(), evicted.end());
  }
  const auto& events = pruned ? *pruned : b.events;
  if (auto err = st.store.apply(b.rank, b.seq + 1, events)) {
    // Not applied: offered again after a retry's resync.
    st.bound->rebuild(st.index, b.rank);
    stall(self, b.rank, err);
    return;
  }
  unstall(self, b.rank);
  st.next_seq[b.rank] = b.seq + 1;
  st.stats.count(st.index.apply(b.rank, events));
  st.bound->note(st.index, b.rank, events);
  st.stats.unknown_removal->inc(noops);
  for (const auto& ev : evicted)
    st.stats.tier_evicted->inc(
      std::get<kv::block_removed>(ev).block_hashes.size());
  // Fold the log into a snapshot now and then (every 10,000 batches, or
  // once the log since the last holds more blocks than twice the rank's,
  // at least 65,536): recovery stays short and the log bounded by what the
  // index holds, however large the batches.
  auto& logged = st.events_since_compaction[b.rank];
  for (const auto& ev : events)
    std::visit(
      [&](const auto& e) {
        if constexpr (requires { e.block_hashes; })
          logged += e.block_hashes.size();
        else
          logged += 1;
      },
      ev);
  auto event_cap =
    std::max<uint64_t>(compaction_min_events, 2 * st.index.blocks(b.rank));
  if (++st.since_compaction[b.rank] >= compaction_interval ||
      logged >= event_cap) {
    st.since_compaction[b.rank] = 0;
    logged = 0;
    if (auto err =
          st.store.compact(b.rank, st.index.ranks().at(b.rank), b.seq + 1))
      spdlog::error("indexer: {}", describe(err));
  }
  st.stats.batches->inc();
  if (st.cfg.listener && evicted.empty()) {
    st.cfg.listener->on_batch(b);
  } else if (st.cfg.listener) {
    auto with = b;
    with.events.insert(with.events.end(), evicted.begin(), evicted.end());
    st.cfg.listener->on_batch(with);
  }
  publish_gauges(self);
}

// True when `id` is the instance the index belongs to; else resets.
bool on_instance(self_ptr self, const std::string& id) {
  auto& st = self->state;
  if (id == st.instance_id)
    return true;
  spdlog::info("indexer: engine instance '{}' replaces '{}': index reset", id,
               st.instance_id);
  std::vector<int> ranks;
  for (const auto& [r, _] : st.index.ranks())
    ranks.push_back(r);
  if (auto err = st.store.reset(id))
    spdlog::error("indexer: {}", describe(err));
  st.index.clear();
  st.bound.emplace(st.cfg.tier_cap);
  st.next_seq.clear();
  st.instance_id = id;
  for (auto r : ranks)
    tell_cleared(self, r);
  publish_gauges(self);
  return false;
}

std::vector<std::shared_ptr<const kv_batch>>
snapshot_of(const indexer_state& st) {
  std::vector<std::shared_ptr<const kv_batch>> snap;
  for (const auto& [rank, blocks] : st.index.ranks()) {
    auto b = std::make_shared<kv_batch>();
    b->rank = rank;
    auto next = st.next_seq.count(rank) ? st.next_seq.at(rank) : 0;
    b->seq = next > 0 ? next - 1 : 0;
    b->events = st.index.snapshot_events(rank);
    snap.push_back(std::move(b));
  }
  return snap;
}

std::string json_of(const indexer_state& st) {
  nlohmann::json doc;
  doc["instance_id"] = st.instance_id;
  auto& ranks = doc["ranks"] = nlohmann::json::object();
  for (const auto& [rank, blocks] : st.index.ranks()) {
    auto& r = ranks[std::to_string(rank)];
    r["next_seq"] = st.next_seq.count(rank) ? st.next_seq.at(rank) : 0;
    auto& list = r["blocks"] = nlohmann::json::array();
    for (const auto& [hash, info] : blocks) {
      auto media = nlohmann::json::array();
      for (const auto& place : info.where)
        media.push_back(kv::to_string(place.medium));
      list.push_back({{"hash", hash},
                      {"parent", info.parent ? nlohmann::json(*info.parent)
                                             : nlohmann::json()},
                      {"token_ids", info.token_ids},
                      {"media", std::move(media)}});
    }
  }
  return doc.dump();
}

indexer_actor::behavior_type behavior(self_ptr self) {
  return {
    [=](apply_atom, const std::shared_ptr<const kv_batch>& b) {
      on_apply(self, *b);
    },
    [=](instance_atom, const std::string& id) { return on_instance(self, id); },
    [=](next_seq_atom, int32_t rank) { return self->state.next_seq[rank]; },
    [=](reset_rank_atom, int32_t rank, uint64_t next) {
      auto& st = self->state;
      spdlog::warn("indexer: rank {} reset; continuing at sequence {}", rank,
                   next);
      if (auto err = st.store.reset_rank(rank, next))
        spdlog::error("indexer: {}", describe(err));
      st.index.clear_rank(rank);
      st.bound->rebuild(st.index, rank);
      st.next_seq[rank] = next;
      tell_cleared(self, rank);
      publish_gauges(self);
    },
    [=](subscribe_atom, const snapshot_callback& cb) {
      cb(snapshot_of(self->state));
      return true;
    },
    [=](snapshot_atom) { return json_of(self->state); },
    [=](retry_store_atom, int32_t rank) { on_retry_store(self, rank); },
  };
}

} // namespace

indexer_actor spawn_indexer(caf::actor_system& sys, indexer_config cfg) {
  return sys.spawn(indexer, std::move(cfg));
}

} // namespace outrider::indexer
