// Session affinity in placement: a conversation's turns back to the worker
// that served the last one (core/session_table.hpp).
#include "actors/router/core/placement.hpp"

namespace outrider::router {

size_t placement::follow_session(const std::vector<candidate>& cands,
                                 uint32_t prompt_blocks, size_t pick,
                                 const route_request& req, route_decision& d) {
  if (cfg_.session.mode == session_mode::off || req.session.empty())
    return pick;
  auto now = now_();
  d.session_outcome = "new";
  if (auto held = sessions_.find(req.session, now)) {
    for (size_t i = 0; i < cands.size(); ++i) {
      if (cands[i].slot != held->slot ||
          slots_[held->slot].worker_id != held->worker_id)
        continue; // not a candidate now, or the slot is another worker's
      bool keep = cfg_.session.mode == session_mode::hard || i == pick;
      if (!keep) {
        auto sel = selector();
        double mine = cost(cands[i], prompt_blocks, sel);
        double best = cost(cands[pick], prompt_blocks, sel);
        keep = mine <= best * (1 + cfg_.session.margin) + 1;
      }
      d.session_outcome = keep ? "kept" : "moved";
      if (keep)
        pick = i;
      break;
    }
  }
  auto slot = cands[pick].slot;
  sessions_.remember(req.session, {slots_[slot].worker_id, slot}, now);
  return pick;
}

} // namespace outrider::router
