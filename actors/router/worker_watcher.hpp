#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <grpcpp/security/credentials.h>

#include "actors/router/kv_router.hpp"
#include "cluster/discovery.hpp"
#include "cluster/nats_discovery.hpp"
#include "runtime/actor_slot.hpp"

namespace outrider::router {

/// Follows discovery and the workers' event planes, on threads of its own:
/// tells the router which workers exist (a worker is routable only while
/// its record does) and, per worker, subscribes to its sidecar's
/// `SubscribeKvEvents` (snapshot, then live; on a broken stream it
/// resubscribes with a snapshot). Everything goes to the router actor's
/// current incarnation; when the supervisor restarts it, the watcher tells
/// the new one every worker again and resubscribes with snapshots, so its
/// index is rebuilt from the sidecars.
class worker_watcher {
 public:
  /// `creds` secure the calls to the sidecars' relays (--tls-*).
  worker_watcher(std::shared_ptr<cluster::discovery> disc,
                 runtime::slot_ptr<kv_router_actor> router,
                 std::shared_ptr<grpc::ChannelCredentials> creds =
                   grpc::InsecureChannelCredentials());
  ~worker_watcher(); // stops every thread

  worker_watcher(const worker_watcher&) = delete;
  worker_watcher& operator=(const worker_watcher&) = delete;

 private:
  struct subscription;
  void run();

  std::shared_ptr<cluster::discovery> disc_;
  runtime::slot_ptr<kv_router_actor> router_;
  std::shared_ptr<grpc::ChannelCredentials> creds_;
  uint64_t generation_ = 0; // of the router actor we told
  std::atomic<bool> stopping_{false};
  std::map<std::string, cluster::worker_record> known_;
  std::map<std::string, std::unique_ptr<subscription>> subs_;
  std::thread thread_;
};

} // namespace outrider::router
