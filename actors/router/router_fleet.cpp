#include "actors/router/router_fleet.hpp"

#include <cstdio>
#include <random>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include "cluster/discovery_from.hpp"
#include "cluster/nats_bookings.hpp"

namespace outrider::router {

std::shared_ptr<cluster::nats_kv_plane>
event_plane_from(runtime::role_env& ctx, const router_settings& s) {
  if (!s.nats_event_plane)
    return nullptr;
  std::weak_ptr<runtime::health_state> health = ctx.health;
  auto nats = s.discovery.nats;
  nats.on_connection = [health](bool up) {
    if (auto h = health.lock())
      h->set_component("event_plane",
                       up ? "connected"
                          : "disconnected: resynchronising on reconnect");
  };
  auto plane = std::make_shared<cluster::nats_kv_plane>(std::move(nats));
  if (auto err = plane->open()) {
    ctx.control->request_exit(2, "--event-plane nats: " + describe(err));
    return nullptr;
  }
  ctx.health->set_component("event_plane",
                            plane->connected() ? "connected" : "connecting");
  return plane;
}

booking_share
booking_share_from(runtime::role_env& ctx, const router_settings& s,
                   const runtime::slot_ptr<kv_router_actor>& brain) {
  if (!s.share_bookings)
    return {};
  booking_share share;
  char host[256] = "router";
  gethostname(host, sizeof(host) - 1);
  std::random_device rd;
  char tag[16];
  std::snprintf(tag, sizeof(tag), "%08x", rd());
  share.router_id = std::string{host} + "-" + tag;
  share.bus = std::make_shared<cluster::nats_bookings>(s.discovery.nats);
  auto err = share.bus->open();
  if (!err)
    err = share.bus->subscribe([brain](cluster::booking_note n) {
      if (auto b = brain->get())
        caf::anon_send(
          b, booking_atom::value,
          std::make_shared<const cluster::booking_note>(std::move(n)));
    });
  if (err) {
    ctx.control->request_exit(2, "--share-bookings: " + describe(err));
    return {};
  }
  spdlog::info("router: sharing bookings as {} on {}", share.router_id,
               s.discovery.nats.booking_subject);
  return share;
}

} // namespace outrider::router
