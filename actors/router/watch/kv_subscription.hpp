#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include <grpcpp/grpcpp.h>

#include "actors/router/brain/kv_router.hpp"
#include "actors/router/watch/kv_stream.hpp"
#include "cluster/worker_record.hpp"
#include "openengine.pb.h"
#include "runtime/actor_slot.hpp"

namespace outrider::router {

/// One worker's SubscribeKvEvents on the gRPC event plane, snapshot then
/// live, on gRPC's callback API; a broken stream is opened again after a
/// short pause (a gRPC alarm), with a snapshot. No thread of its own. (On
/// the NATS event plane a kv_follower takes its place.)
struct kv_subscription : std::enable_shared_from_this<kv_subscription> {
  std::string worker_id;
  // Told to the router actor with its first events, from the thread that
  // sends them (so it comes first): a worker whose relay never answers as
  // a relay is never placed on.
  cluster::worker_record record;
  bool announced = false; // the stream's callbacks come one at a time
  // The relay answered as a relay once (any thread reads it).
  std::atomic<bool> answered_once{false};
  std::shared_ptr<grpc::Channel> channel;
  runtime::slot_ptr<kv_router_actor> router;
  in_flight pending;
  std::mutex mtx;
  bool stopping = false;                     // guarded by mtx
  uint64_t attempts = 0;                     // guarded by mtx
  std::shared_ptr<grpc::ClientContext> call; // guarded by mtx
  rearmable_alarm pause;                     // guarded by mtx
  // Between attempts: 200 ms, doubled after each call that never got an
  // answer from a relay, up to 30 s (a relay that is gone or is not one
  // costs the router little; a sidecar that restarts writes a new record,
  // followed at once); back to 200 ms once one answers.
  std::chrono::milliseconds backoff{200}; // guarded by mtx
  std::set<int> seen; // the first batch of a rank is its snapshot

  void open();
  // The relay accepted the subscription (its initial metadata came: a
  // sidecar's carries the snapshot's epoch; an OpenEngine engine serving
  // as its own relay sends it with or before its first batch): the worker
  // can be placed on from now. Unreachable addresses, or servers that are
  // not relays (an HTTP 404, UNIMPLEMENTED), send none.
  bool answered(const kv_metadata&);
  void announce();
  bool on(openengine::v1::SubscribeKvEventsResponse& resp);
  void closed(const grpc::Status& st);
  // Cancels the call or the pause and waits until neither can run.
  void stop();
};

} // namespace outrider::router
