// The placement's share of other routers' bookings (--share-bookings).
#include "actors/router/core/placement.hpp"
#include "cluster/kv/block_hash.hpp"

namespace outrider::router {

std::optional<uint32_t> placement::remote(const cluster::booking_note& n) {
  auto now = now_();
  routers_seen_[n.router_id] = now;
  auto id = std::make_pair(n.router_id, n.key);
  using op = cluster::booking_note::op;
  if (n.what == op::alive)
    return std::nullopt;
  if (n.what != op::add) {
    auto r = remote_.find(id);
    if (r == remote_.end())
      return std::nullopt;
    auto key = r->second.key;
    if (n.what == op::release)
      remote_.erase(r);
    return unbook(key, n.what == op::release);
  }
  auto w = worker_slots_.find(n.worker_id);
  if (w == worker_slots_.end() || n.rank < 0 ||
      static_cast<size_t>(n.rank) >= w->second.size() || remote_.count(id))
    return std::nullopt;
  auto slot = w->second[static_cast<size_t>(n.rank)];
  auto& info = slots_[slot];
  booking b;
  b.slot = slot;
  b.prefill_tokens = n.prefill_tokens;
  b.decode_blocks = n.decode_blocks;
  info.prefill_tokens += b.prefill_tokens;
  info.decode_blocks += b.decode_blocks;
  reorder(slot);
  auto key = next_remote_key_++;
  if (cfg_.mode == engine::router_mode::kv && !n.blocks.empty()) {
    walk_held(slot, n.blocks);
    predict(key, b, n.blocks);
  }
  bookings_[key] = std::move(b);
  remote_[id] = {key, now};
  // Another replica placed a turn of this session: its next turn goes
  // there too, whichever replica gets it.
  if (cfg_.session.mode != session_mode::off && !n.session.empty())
    sessions_.remember(n.session, {n.worker_id, slot}, now);
  return slot;
}

size_t placement::expire_remote(clock::time_point cutoff) {
  auto too_old = now_() - cfg_.remote_booking_ttl;
  size_t gone = 0;
  for (auto r = remote_.begin(); r != remote_.end();) {
    auto seen = routers_seen_.find(r->first.first);
    bool silent = seen == routers_seen_.end() || seen->second < cutoff;
    if (silent || r->second.at < too_old) {
      unbook(r->second.key, true);
      r = remote_.erase(r);
      ++gone;
    } else {
      ++r;
    }
  }
  std::erase_if(routers_seen_,
                [&](const auto& kv) { return kv.second < cutoff; });
  return gone;
}

std::vector<uint64_t> placement::sequence_of(const route_request& req) const {
  auto bs = std::max(1u, block_size_);
  return kv::sequence_keys(req.tokens.data(), req.tokens.size(), bs,
                           req.identity);
}

std::optional<cluster::booking_note> placement::note_of(uint64_t key) const {
  auto i = bookings_.find(key);
  if (i == bookings_.end())
    return std::nullopt;
  const auto& s = slots_[i->second.slot];
  cluster::booking_note n;
  n.what = cluster::booking_note::op::add;
  n.key = key;
  n.worker_id = s.worker_id;
  n.rank = s.rank;
  n.prefill_tokens = i->second.prefill_tokens;
  n.decode_blocks = i->second.decode_blocks;
  return n;
}

} // namespace outrider::router
