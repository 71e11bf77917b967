#include "actors/router/core/router_config.hpp"

namespace outrider::router {

void take_live_settings(router_config& into, const router_config& from) {
  auto& s = into.selector;
  s.overlap_score_weight = from.selector.overlap_score_weight;
  s.decode_weight = from.selector.decode_weight;
  s.queue_weight = from.selector.queue_weight;
  s.evict_weight = from.selector.evict_weight;
  s.temperature = from.selector.temperature;
  into.priority_overlap = from.priority_overlap;
  into.queue_threshold = from.queue_threshold;
  into.queue_kv_share = from.queue_kv_share;
  into.prediction_ttl = from.prediction_ttl;
}

std::vector<std::string> restart_needed(const router_config& a,
                                        const router_config& b) {
  std::vector<std::string> out;
  auto differ = [&](bool d, const char* option) {
    if (d)
      out.emplace_back(option);
  };
  differ(a.mode != b.mode, "router-mode");
  differ(a.model != b.model, "served-model");
  differ(a.tiers.weight != b.tiers.weight, "kv-cpu-weight/kv-storage-weight");
  differ(a.tiers.credit_remote != b.tiers.credit_remote, "kv-credit-remote");
  differ(a.slot_block_cap != b.slot_block_cap, "kv-slot-cap");
  differ(a.session.mode != b.session.mode ||
           a.session.margin != b.session.margin ||
           a.session.ttl != b.session.ttl || a.session.cap != b.session.cap,
         "session-affinity/session-margin/session-ttl");
  differ(a.exhaustive != b.exhaustive, "router-search");
  differ(a.worker_series_cap != b.worker_series_cap,
         "metrics-worker-series-cap");
  return out;
}

} // namespace outrider::router
