// What a SIGHUP may change in a running router: the placement's weights,
// temperature and queue limits go to the router actor now (and to every
// later incarnation); flow control (band cap, quantum, queue timeout) to
// the dispatch queue; the disaggregation policy and its thresholds to the
// dispatcher and the endpoint picker. Every other setting that differs is
// named as needing a restart, and left as it is.
#include <spdlog/spdlog.h>

#include "actors/router/router_parts.hpp"
#include "actors/router/router_service.hpp"

namespace outrider::router {

namespace {

// The settings outside the placement that differ, by option name: they
// are read once, at start.
std::vector<std::string> fixed_differences(const router_settings& a,
                                           const router_settings& b) {
  std::vector<std::string> out;
  auto differ = [&](bool d, const char* option) {
    if (d)
      out.emplace_back(option);
  };
  differ(a.http_host != b.http_host || a.http_port != b.http_port,
         "http-host/http-port");
  differ(a.http_tls != b.http_tls, "http-tls");
  differ(a.grpc_port != b.grpc_port, "grpc-port");
  differ(a.epp_port != b.epp_port, "epp-port");
  differ(a.tokenizer_dir != b.tokenizer_dir, "tokenizer");
  differ(a.chat_template_file != b.chat_template_file, "chat-template");
  differ(a.migration_limit != b.migration_limit, "migration-limit");
  differ(a.direct_dispatch != b.direct_dispatch ||
           a.mux_dispatch != b.mux_dispatch,
         "dispatch");
  differ(a.request_timeout != b.request_timeout, "request-timeout");
  differ(a.disagg.has_value() != b.disagg.has_value(),
         "router-conditional-disagg");
  differ(a.tls.cert != b.tls.cert || a.tls.key != b.tls.key ||
           a.tls.ca != b.tls.ca,
         "tls-cert/tls-key/tls-ca (the files' contents reload on their own)");
  differ(a.discovery.dir != b.discovery.dir ||
           a.discovery.backend != b.discovery.backend,
         "discovery");
  differ(a.nats_event_plane != b.nats_event_plane, "event-plane");
  differ(a.frontend.objectives != b.frontend.objectives, "flow-objectives");
  return out;
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names)
    out += (out.empty() ? "" : ", ") + n;
  return out;
}

} // namespace

void service::reload(const router_settings& next) {
  auto& p = *parts_;
  auto fixed = fixed_differences(p.settings, next);
  router_config now;
  {
    std::lock_guard<std::mutex> guard{p.config_mtx};
    for (auto& n : restart_needed(p.config, next.placement))
      fixed.push_back(std::move(n));
    take_live_settings(p.config, next.placement);
    now = p.config;
  }
  // Flow control and the disaggregation policy's thresholds: for what
  // comes next (requests waiting keep their place and deadline).
  p.dispatch->queue().retune(next.flow, next.queue_timeout);
  if (p.disagg && next.disagg && !(*p.disagg->get() == *next.disagg))
    p.disagg->set(*next.disagg);
  if (auto brain = p.brain->get())
    caf::anon_send(brain, retune_atom::value,
                   std::make_shared<const router_config>(now));
  const auto& s = now.selector;
  spdlog::info(
    "router: settings reloaded: overlap weight {}, decode weight {}, queue "
    "weight {}, evict weight {}, temperature {}, priority overlap {}",
    s.overlap_score_weight, s.decode_weight, s.queue_weight, s.evict_weight,
    s.temperature, now.priority_overlap);
  spdlog::info("router: flow band cap {}, quantum {}, queue timeout {} ms{}",
               next.flow.band_cap, next.flow.quantum,
               next.queue_timeout.count(),
               p.disagg ? ", disaggregation " + disagg_json(*p.disagg->get())
                        : std::string{});
  if (!fixed.empty())
    spdlog::warn("router: changed in the file but read only at start "
                 "(restart to apply): {}",
                 joined(fixed));
}

} // namespace outrider::router
