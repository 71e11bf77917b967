#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/security/credentials.h>

#include "actors/router/brain/kv_router.hpp"
#include "actors/router/watch/kv_follower.hpp"
#include "actors/router/watch/kv_subscription.hpp"
#include "actors/router/watch/load_poller.hpp"
#include "actors/router/watch/model_catalog.hpp"
#include "cluster/discovery.hpp"
#include "cluster/nats_discovery.hpp"
#include "runtime/actor_slot.hpp"

namespace outrider::router {

/// Follows discovery on a thread of its own, and the workers' event planes
/// on gRPC's callback API (no thread per worker): tells the router which
/// workers exist (a worker is routable only while its record does) and, per
/// worker, subscribes to its sidecar's `SubscribeKvEvents` (snapshot, then
/// live; on a broken stream it resubscribes with a snapshot). Everything goes
/// to the router actor's current incarnation; when the supervisor restarts it,
/// the watcher tells the new one every worker again and resubscribes with
/// snapshots, so its index is rebuilt from the sidecars (the slot tells it at
/// once: no polling). With the NATS event
/// plane, a kv_follower per worker takes the place of the subscription.
class worker_watcher {
 public:
  /// `creds` secure the calls to the sidecars' relays (--tls-*). With a
  /// `plane` (--event-plane nats, opened) events come from NATS and the
  /// sidecars are asked only for snapshots (kv_follower). A record whose
  /// relay is one of `own` (this router's listeners, "host:port") is
  /// refused: the router would call itself.
  worker_watcher(std::shared_ptr<cluster::discovery> disc,
                 runtime::slot_ptr<kv_router_actor> router,
                 std::shared_ptr<grpc::ChannelCredentials> creds =
                   grpc::InsecureChannelCredentials(),
                 std::shared_ptr<cluster::nats_kv_plane> plane = nullptr,
                 std::string tls_server_name = {},
                 std::vector<std::string> own = {},
                 std::shared_ptr<trace::tracer> tracer = nullptr,
                 std::shared_ptr<model_catalog> catalog = nullptr);
  ~worker_watcher(); // stops its thread and every subscription

  worker_watcher(const worker_watcher&) = delete;
  worker_watcher& operator=(const worker_watcher&) = delete;

 private:
  void run();
  void follow(const cluster::worker_record& r);
  void unfollow(const std::string& worker_id);
  // Its relay answered as a relay (on either event plane).
  bool answered(const std::string& worker_id);
  // Tells the load poller the workers whose relays answered, when that
  // changed.
  void poll_answered();
  // Waits for discovery to change, or for a pause that grows with what a
  // listing costs.
  void pause_after(std::chrono::nanoseconds listing_cpu);

  std::shared_ptr<cluster::discovery> disc_;
  runtime::slot_ptr<kv_router_actor> router_;
  std::shared_ptr<grpc::ChannelCredentials> creds_;
  std::string server_name_;           // --tls-server-name
  std::vector<std::string> own_;      // this router's listeners, normalized
  std::set<std::string> warned_self_; // records that name own_, logged once
  uint64_t generation_ = 0;           // of the router actor we told
  std::atomic<bool> stopping_{false};
  std::map<std::string, cluster::worker_record> known_;
  // The last listing, as discovery gave it, and how many of its records
  // named this router (counted again while it stands).
  std::vector<cluster::worker_record> last_listing_;
  size_t last_self_ = 0;
  size_t answered_count_ = ~size_t{0}; // of known_, as the poller was told
  std::map<std::string, std::shared_ptr<kv_subscription>> subs_;
  std::shared_ptr<cluster::nats_kv_plane> plane_;
  std::shared_ptr<trace::tracer> tracer_;  // to the followers; may be null
  std::shared_ptr<model_catalog> catalog_; // told each listing; may be null
  uint64_t plane_connections_ = 0;
  std::mutex followers_mtx_; // the NATS thread looks followers up
  std::map<std::string, std::unique_ptr<kv_follower>> followers_;
  std::unique_ptr<load_poller> poller_; // the engines' own KV load
  // Wakes the thread when the supervisor (re)starts the router actor: it
  // waits on discovery, or here before the first start.
  struct waker {
    std::mutex mtx;
    std::condition_variable cv;
    std::weak_ptr<cluster::discovery> disc;
    void wake() {
      { std::lock_guard<std::mutex> guard{mtx}; }
      cv.notify_all();
      if (auto d = disc.lock())
        d->wake();
    }
  };
  std::shared_ptr<waker> waker_ = std::make_shared<waker>();
  uint64_t slot_listener_ = 0;
  std::thread thread_;
};

} // namespace outrider::router
