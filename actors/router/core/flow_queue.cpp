#include "actors/router/core/flow_queue.hpp"

#include <algorithm>

namespace outrider::router {

flow_queue::pushed flow_queue::push(uint64_t id, const std::string& flow,
                                    int band, uint64_t cost) {
  pushed out;
  if (index_.count(id))
    return out;
  auto& b = bands_[band];
  if (b.size >= cfg_.band_cap) {
    // Full: push out the newest of the flow with the most waiting, when
    // that flow is not this one (nor as small as this one would become).
    auto mine = b.flows.count(flow) ? b.flows.at(flow).waiting.size() : 0;
    const std::string* largest = nullptr;
    size_t most = 0;
    for (const auto& [name, f] : b.flows)
      if (f.waiting.size() > most) {
        most = f.waiting.size();
        largest = &name;
      }
    if (!largest || most <= mine + 1) {
      if (b.size == 0)
        bands_.erase(band);
      return out;
    }
    auto victim = b.flows.at(*largest).waiting.back().id;
    remove(victim);
    out.evicted = victim;
  }
  auto& b2 = bands_[band]; // remove() may have dropped an emptied band
  return push_into(b2, id, flow, band, cost, out);
}

flow_queue::pushed flow_queue::push_into(band_state& b, uint64_t id,
                                         const std::string& flow, int band,
                                         uint64_t cost, pushed out) {
  auto [it, idle] = b.flows.try_emplace(flow);
  auto& f = it->second;
  cost = std::max<uint64_t>(cost, 1);
  if (idle) {
    // Back from idle: the new-flow list, with the credit of this one
    // request (a burst sends its first request first, then takes turns).
    f.deficit = cost;
    b.fresh.push_back(flow);
  }
  f.waiting.push_back({id, cost});
  ++b.size;
  index_.emplace(id, where{band, flow});
  out.queued = true;
  return out;
}

// Sends the head of the front flow of `from` (its credit covers it) and
// keeps the flow's place or moves it on.
uint64_t flow_queue::serve(band_state& b, std::list<std::string>& from) {
  auto name = from.front();
  auto& f = b.flows.at(name);
  auto e = f.waiting.front();
  f.waiting.pop_front();
  f.deficit -= e.cost;
  --b.size;
  index_.erase(e.id);
  if (f.waiting.empty()) {
    // An idle flow keeps no credit (DRR's rule: no saving up).
    from.pop_front();
    b.flows.erase(name);
  } else if (f.waiting.front().cost > f.deficit) {
    b.active.splice(b.active.end(), from, from.begin()); // its turn is over
  }
  return e.id;
}

std::optional<uint64_t> flow_queue::pop() {
  if (bands_.empty())
    return std::nullopt;
  auto bi = bands_.begin(); // the highest band: never empty when present
  auto& b = bi->second;
  auto done = [&](uint64_t id) {
    if (b.size == 0)
      bands_.erase(bi);
    return id;
  };
  // New flows first, each for the one request it came with.
  while (!b.fresh.empty()) {
    auto& f = b.flows.at(b.fresh.front());
    if (f.waiting.front().cost <= f.deficit)
      return done(serve(b, b.fresh));
    b.active.splice(b.active.end(), b.fresh, b.fresh.begin());
  }
  auto quantum = std::max<uint64_t>(cfg_.quantum, 1);
  // Skip whole rounds in which no flow could send: credit every active
  // flow the rounds the nearest one still needs, at once (bounded work
  // however large a prompt is against the quantum).
  uint64_t rounds = UINT64_MAX;
  for (const auto& name : b.active) {
    const auto& f = b.flows.at(name);
    auto need = f.waiting.front().cost;
    uint64_t r = need <= f.deficit ? 0 : (need - f.deficit - 1) / quantum;
    rounds = std::min(rounds, r);
  }
  if (rounds > 0 && rounds != UINT64_MAX)
    for (const auto& name : b.active)
      b.flows.at(name).deficit += rounds * quantum;
  // Deficit round robin: the flow at the front is credited a quantum on
  // its turn and sends while its credit covers its next request; then the
  // next flow's turn. At most two passes after the skip above.
  for (size_t turns = 0; turns <= 2 * b.active.size(); ++turns) {
    auto& f = b.flows.at(b.active.front());
    if (f.waiting.front().cost > f.deficit) {
      f.deficit += quantum;
      if (f.waiting.front().cost > f.deficit) {
        b.active.splice(b.active.end(), b.active, b.active.begin());
        continue;
      }
    }
    return done(serve(b, b.active));
  }
  return std::nullopt; // not reached: the skip guarantees a sender
}

bool flow_queue::remove(uint64_t id) {
  auto it = index_.find(id);
  if (it == index_.end())
    return false;
  auto bi = bands_.find(it->second.band);
  auto& b = bi->second;
  auto fi = b.flows.find(it->second.flow);
  auto& w = fi->second.waiting;
  w.erase(std::find_if(w.begin(), w.end(),
                       [&](const entry& e) { return e.id == id; }));
  --b.size;
  if (w.empty()) {
    b.active.remove(fi->first);
    b.fresh.remove(fi->first);
    b.flows.erase(fi);
  }
  if (b.size == 0)
    bands_.erase(bi);
  index_.erase(it);
  return true;
}

size_t flow_queue::band_size(int band) const {
  auto bi = bands_.find(band);
  return bi == bands_.end() ? 0 : bi->second.size;
}

size_t flow_queue::flows() const {
  size_t n = 0;
  for (const auto& [band, b] : bands_)
    n += b.active.size() + b.fresh.size();
  return n;
}

} // namespace outrider::router
