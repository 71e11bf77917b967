#include "actors/router/core/session_table.hpp"

namespace outrider::router {

std::optional<session_table::where>
session_table::find(const std::string& session, clock::time_point now) {
  auto it = entries_.find(session);
  if (it == entries_.end())
    return std::nullopt;
  if (now - it->second.seen > cfg_.ttl) {
    lru_.erase(it->second.lru);
    entries_.erase(it);
    return std::nullopt;
  }
  return it->second.at;
}

void session_table::remember(const std::string& session, where w,
                             clock::time_point now) {
  if (cfg_.cap == 0)
    return;
  auto it = entries_.find(session);
  if (it != entries_.end()) {
    it->second.at = std::move(w);
    it->second.seen = now;
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    return;
  }
  while (entries_.size() >= cfg_.cap) {
    entries_.erase(lru_.back());
    lru_.pop_back();
  }
  lru_.push_front(session);
  entries_.emplace(session, entry{std::move(w), now, lru_.begin()});
}

} // namespace outrider::router
