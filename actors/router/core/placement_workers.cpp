#include "actors/router/core/placement.hpp"

// The worker set of `placement` and what is known of each rank: records
// joining and leaving, KV events into the index, the engines' own load
// reports, and the read-only views for status and metrics. The decisions
// are in placement.cpp.

#include <algorithm>

#include <spdlog/spdlog.h>

#include "actors/router/core/endpoint_subset.hpp"

namespace outrider::router {

using engine::worker_role;

placement::join placement::add_worker(const cluster::worker_record& r) {
  if (!cfg_.model.empty() && r.model != cfg_.model) {
    spdlog::warn("router: worker {} serves '{}', not '{}': refused",
                 r.worker_id, r.model, cfg_.model);
    return join::refused_model;
  }
  if (block_size_ == 0)
    block_size_ = r.kv_block_size;
  if (r.kv_block_size != block_size_) {
    spdlog::warn("router: worker {} has block size {}, not {}: refused",
                 r.worker_id, r.kv_block_size, block_size_);
    return join::refused_block_size;
  }
  auto known = workers_.find(r.worker_id);
  if (known != workers_.end()) {
    if (known->second.instance_id == r.instance_id &&
        known->second.relay_endpoint == r.relay_endpoint)
      return join::unchanged;
    remove_worker(r.worker_id);
  }
  workers_[r.worker_id] = r;
  auto& slots = worker_slots_[r.worker_id];
  for (uint32_t rank = 0; rank < r.data_parallel_size; ++rank) {
    slots.push_back(static_cast<uint32_t>(slots_.size()));
    predictions_.emplace_back();
    slots_.push_back(
      slot_info{r.worker_id, r.role, r.relay_endpoint, r.engine_endpoint,
                r.protocol, r.bootstrap_endpoint, static_cast<int>(rank), true,
                rank_endpoint(r.http_endpoint, rank), 0, 0});
    slots_.back().record_total =
      r.total_kv_blocks / std::max<uint32_t>(1, r.data_parallel_size);
    // The index keeps no more than the engine can hold (LMCache never
    // removes): on GPU the record's total (the whole engine's, or a rank's:
    // engines differ, and the larger is the safe bound), 1/16 more for a
    // batch that stores before it removes; the configured cap elsewhere.
    auto slot = static_cast<uint32_t>(slots_.size() - 1);
    auto total = r.total_kv_blocks;
    auto gpu_cap = total ? total + total / 16 + 1 : cfg_.slot_block_cap;
    index_.set_cap(slot, kv::medium::gpu, gpu_cap);
    index_.set_cap(slot, kv::medium::cpu, cfg_.slot_block_cap);
    index_.set_cap(slot, kv::medium::storage, cfg_.slot_block_cap);
    // Its GPU table sized for the rank's share of the cache at its first
    // block (a fleet's ranks fill in step: their tables growing together
    // stalled the actor), up to a bound on what a record can make the
    // router set aside for blocks it may never see.
    auto share = slots_.back().record_total;
    index_.expect(
      slot, kv::medium::gpu,
      std::min<uint64_t>(share + share / 16 + 1, max_expected_blocks));
    reorder(slot);
  }
  spdlog::info("router: worker {} ({} rank(s), {}) joined", r.worker_id,
               r.data_parallel_size, r.relay_endpoint);
  return join::joined;
}

void placement::remove_worker(const std::string& id) {
  auto i = worker_slots_.find(id);
  if (i == worker_slots_.end())
    return;
  for (auto slot : i->second) {
    index_.clear_slot(slot);
    slots_[slot].alive = false;
    slots_[slot].unprefilled.clear();
    slots_[slot].covering.clear();
    predictions_[slot].each([&](uint64_t key, const prediction&) {
      predicted_bits_.clear(key, slot);
    });
    predictions_[slot] = {};
    reorder(slot);
  }
  std::erase_if(bookings_, [&](const auto& kv) {
    return slots_[kv.second.slot].worker_id == id;
  });
  worker_slots_.erase(i);
  workers_.erase(id);
  spdlog::info("router: worker {} left", id);
}

std::map<std::string, std::map<int, std::vector<uint64_t>>>
placement::held_blocks() const {
  std::map<std::string, std::map<int, std::vector<uint64_t>>> out;
  for (const auto& [id, slots] : worker_slots_)
    for (auto slot : slots)
      out[id][slots_[slot].rank] = index_.engine_hashes(slot);
  return out;
}

std::optional<uint32_t> placement::apply_events(const worker_events& ev) {
  auto i = worker_slots_.find(ev.worker_id);
  if (i == worker_slots_.end() || ev.rank < 0 ||
      static_cast<size_t>(ev.rank) >= i->second.size())
    return std::nullopt;
  auto slot = i->second[static_cast<size_t>(ev.rank)];
  if (ev.reset)
    index_.clear_slot(slot);
  // A predicted block the engine has now reported stored or removed is the
  // index's to follow: its prediction goes, so that an eviction counts at
  // once instead of after prediction_ttl (pending ones stay: a request
  // queued there will compute them again). A block a queued request
  // counted on the index for and that is now evicted becomes predicted
  // for it.
  auto& pred = predictions_[slot];
  bool covering = !slots_[slot].covering.empty();
  std::vector<uint64_t> touched;
  index_.apply(slot, ev.events,
               pred.size() == 0 && !covering ? nullptr : &touched);
  if (ev.reset) {
    // What the index held of the rank is gone: no prediction stands for
    // an indexed block until the events say so again.
    std::vector<uint64_t> keys;
    pred.each([&](uint64_t h, const prediction& p) {
      if (p.indexed)
        keys.push_back(h);
    });
    for (auto h : keys)
      pred.find(h)->indexed = false;
  }
  const auto& gpu = index_.tier(kv::medium::gpu);
  for (auto h : touched) {
    auto* p = pred.find(h);
    if (!p)
      continue;
    p->until = {};
    if (p->pending == 0) {
      pred.erase(h);
      predicted_bits_.clear(h, slot);
    } else {
      p->indexed = gpu.holds(h, slot); // stored, or removed again
    }
  }
  if (covering && (ev.reset || !touched.empty()))
    uncover(slot, touched, ev.reset);
  reroom(slot); // what it holds changed
  return slot;
}

void placement::engine_reported(const engine_load& l) {
  auto i = worker_slots_.find(l.worker_id);
  if (i == worker_slots_.end())
    return;
  for (const auto& r : l.ranks) {
    if (r.rank < 0 || static_cast<size_t>(r.rank) >= i->second.size())
      continue;
    auto& s = slots_[i->second[static_cast<size_t>(r.rank)]];
    s.engine_used = static_cast<int64_t>(r.used_kv_blocks);
    s.engine_total = r.total_kv_blocks;
    s.engine_until = now_() + std::max(cfg_.engine_load_fresh, l.fresh_for);
    reroom(i->second[static_cast<size_t>(r.rank)]);
  }
}

std::vector<slot_view> placement::view() const {
  std::vector<slot_view> out;
  for (const auto& [id, slots] : worker_slots_)
    for (auto slot : slots) {
      const auto& s = slots_[slot];
      out.push_back({slot, id, s.role, s.rank, s.prefill_tokens,
                     s.decode_blocks, index_.held(slot), engine_used(s),
                     s.engine_total});
    }
  return out;
}

slot_load placement::load(uint32_t slot) const {
  const auto& s = slots_.at(slot);
  return {s.worker_id, s.rank, s.prefill_tokens, s.decode_blocks};
}

} // namespace outrider::router
