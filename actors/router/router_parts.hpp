#pragma once

// The router service's parts (actors/router/router_service.cpp starts
// them, router_reload.cpp changes what may change live); private to the
// service.

#include <atomic>
#include <mutex>
#include <optional>

#include "actors/router/brain/kv_router.hpp"
#include "actors/router/dispatch/dispatcher.hpp"
#include "actors/router/frontend/epp_server.hpp"
#include "actors/router/frontend/grpc_frontend.hpp"
#include "actors/router/frontend/http_frontend.hpp"
#include "actors/router/router_fleet.hpp"
#include "actors/router/router_settings.hpp"
#include "actors/router/watch/model_catalog.hpp"
#include "actors/router/watch/worker_watcher.hpp"
#include "cluster/discovery.hpp"
#include "cluster/nats_kv_plane.hpp"
#include "cluster/tls.hpp"
#include "runtime/listener_watch.hpp"
#include "runtime/status.hpp"
#include "runtime/tls_watch.hpp"

namespace outrider::router {

// Everything the service started; held by the environment's pre-stop hook
// as well, so it lives until the process (or the embedding program's
// environment) stops.
struct router_parts {
  std::shared_ptr<cluster::discovery> disc;
  std::unique_ptr<worker_watcher> watcher;
  std::unique_ptr<dispatcher> dispatch;
  std::unique_ptr<http_frontend> frontend;
  std::unique_ptr<grpc_frontend> grpc;
  std::unique_ptr<epp_server> epp;                    // --epp-port
  std::unique_ptr<runtime::listener_watch> listeners; // gRPC listeners probed
  std::unique_ptr<runtime::tls_watch> tls_watch;      // --tls-reload-interval
  std::optional<cluster::tls_material> tls;           // --tls-*
  std::shared_ptr<cluster::nats_kv_plane> plane;      // --event-plane nats
  booking_share share;                                // --share-bookings
  runtime::slot_ptr<kv_router_actor> brain =
    std::make_shared<runtime::actor_slot<kv_router_actor>>();
  router_settings settings; // as started (a reload compares against it)
  // --router-conditional-disagg's thresholds, shared by the dispatcher and
  // the endpoint picker (null: off); a reload replaces them.
  runtime::live_ptr<disagg_config> disagg;
  router_config config; // config_mtx: reload writes, a restart reads
  std::mutex config_mtx;
  std::shared_ptr<model_catalog> catalog; // what /v1/models lists
  std::shared_ptr<trace::tracer> tracer;  // --otlp-endpoint; never null
  std::atomic<bool> stopping{false};
  // --role all: ready once the router can place on `ready_at` workers.
  std::mutex ready_mtx;
  size_t ready_at = 0;  // ready_mtx; 0: not waiting
  size_t placeable = 0; // ready_mtx; as the router actor last said
  std::shared_ptr<runtime::health_state> ready_health; // ready_mtx
  std::atomic<bool> ready{false};
  std::atomic<bool> stop_called{false};
  void workers_placeable(size_t n) {
    std::lock_guard<std::mutex> guard{ready_mtx};
    placeable = n;
    check_ready();
  }
  void check_ready() { // under ready_mtx
    if (ready_at == 0 || placeable < ready_at || !ready_health || stopping)
      return;
    ready_health->set_component("workers",
                                std::to_string(ready_at) + " registered");
    ready_health->set_ready(true);
    ready = true;
    ready_at = 0; // once
  }
  void stop(std::chrono::milliseconds grace) {
    if (stop_called.exchange(true))
      return;
    stopping = true;
    ready = false;
    if (listeners)
      listeners->stop(); // no rebuild while the servers stop
    if (tls_watch)
      tls_watch->stop();
    dispatch->begin_shutdown();
    if (epp)
      epp->stop(); // its bookings go with its streams
    if (frontend)
      frontend->stop(grace);
    dispatch->cancel_all(std::chrono::seconds{1});
    if (grpc)
      grpc->stop();
    watcher.reset();
    plane.reset();
    tracer->stop(); // the last spans go out (within its export timeout)
  }
};

} // namespace outrider::router
