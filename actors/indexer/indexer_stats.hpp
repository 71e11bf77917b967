#pragma once

// The indexer's metrics: handles built once (per rank for the gauge).

#include <map>
#include <string>

#include "actors/indexer/local_index.hpp"
#include "runtime/metrics.hpp"

namespace outrider::indexer {

struct indexer_stats {
  runtime::counter* batches = nullptr;
  runtime::counter* stale = nullptr;
  runtime::counter* stored = nullptr;
  runtime::counter* removed = nullptr;
  runtime::counter* cleared = nullptr;
  runtime::counter* unknown_parent = nullptr;
  runtime::counter* unknown_removal = nullptr;
  runtime::counter* tier_evicted = nullptr;
  runtime::counter* store_errors = nullptr;
  runtime::counter* held_back = nullptr;
  runtime::gauge* store_failing = nullptr;
  std::map<int, runtime::gauge*> blocks; // per rank

  static indexer_stats make() {
    auto& m = runtime::global_metrics();
    indexer_stats s;
    s.batches = &m.get_counter("outrider_kv_batches_applied_total",
                               "KV event batches applied and persisted");
    s.stale = &m.get_counter("outrider_kv_batches_out_of_order_total",
                             "Batches refused because of their sequence");
    auto kind = [&](const char* what) {
      return &m.get_counter("outrider_kv_blocks_applied_total",
                            "Block events applied to the local index, by kind",
                            {{"kind", what}});
    };
    s.stored = kind("stored");
    s.removed = kind("removed");
    s.cleared = kind("cleared");
    s.unknown_parent = kind("unknown_parent");
    s.unknown_removal = kind("unknown_removal");
    s.store_errors = &m.get_counter(
      "outrider_index_store_write_errors_total",
      "Writes of the KV index's store that failed (a full disk, a file size "
      "limit, I/O errors): the batch is not applied and is asked again");
    s.held_back = &m.get_counter(
      "outrider_kv_batches_held_back_total",
      "Batches refused without a resync: the store is failing (one resync "
      "follows each retry) or the same resync was asked within a second");
    s.store_failing = &m.get_gauge(
      "outrider_index_store_failing",
      "1 while the index's store cannot write: the worker is withdrawn");
    s.tier_evicted = &m.get_counter(
      "outrider_kv_tier_evictions_total",
      "Offload-tier blocks the sidecar evicted, oldest first, to hold a "
      "rank's tier to --kv-slot-cap (a publisher that never removes)");
    return s;
  }

  void count(const apply_stats& st) {
    stored->inc(st.stored);
    removed->inc(st.removed);
    cleared->inc(st.cleared);
    unknown_parent->inc(st.unknown_parent);
    unknown_removal->inc(st.unknown_removal);
  }

  runtime::gauge& blocks_of(int rank) {
    auto& g = blocks[rank];
    if (!g)
      g = &runtime::global_metrics().get_gauge(
        "outrider_index_blocks", "Blocks in the local index",
        {{"rank", std::to_string(rank)}});
    return *g;
  }
};

} // namespace outrider::indexer
