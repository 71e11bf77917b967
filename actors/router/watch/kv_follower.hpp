#pragma once

#include <deque>
#include <memory>
#include <mutex>
#include <string>

#include <grpcpp/alarm.h>
#include <grpcpp/security/credentials.h>

#include "actors/router/brain/kv_router.hpp"
#include "actors/router/watch/kv_stream.hpp"
#include "cluster/nats_kv_plane.hpp"
#include "cluster/trace/tracer.hpp"
#include "openengine.pb.h"
#include "runtime/actor_slot.hpp"

namespace outrider::router {

/// `--event-plane nats`, one worker on the router's side. Follows the
/// worker's batches on NATS while their positions run 1, 2, 3 ... within
/// one epoch; on a gap, a new epoch (the sidecar restarted), a heartbeat
/// ahead of what arrived, or when told (a NATS reconnect) it
/// resynchronises: takes a snapshot from the sidecar's SubscribeKvEvents
/// (whose metadata says which position it holds), meanwhile keeps what
/// NATS delivers, then replays what follows the snapshot and follows NATS
/// again. A worker whose sidecar cannot be reached is retried with
/// back-off (0.2-5 s). No thread of its own: the snapshot is a gRPC
/// callback call, the back-off a gRPC alarm.
class kv_follower {
 public:
  kv_follower(cluster::worker_record record,
              runtime::slot_ptr<kv_router_actor> router,
              std::shared_ptr<grpc::ChannelCredentials> creds,
              std::string tls_server_name = {},
              std::shared_ptr<trace::tracer> tracer = nullptr);
  ~kv_follower(); // cancels a snapshot or back-off in progress

  kv_follower(const kv_follower&) = delete;
  kv_follower& operator=(const kv_follower&) = delete;

  /// One message for this worker, in NATS order; any thread.
  void on_message(cluster::kv_plane_message m);
  /// Resynchronise from a snapshot (`reason` labels the metric).
  void resync(const std::string& reason);
  /// The worker's relay has answered as a relay (it was told to the router
  /// actor); any thread.
  bool announced() {
    std::lock_guard<std::mutex> guard{announce_mtx_};
    return announced_;
  }

 private:
  struct snapshot_result;
  // Opens a snapshot if one is due and none is in flight; never under mtx_.
  void maybe_start();
  void snapshot_done(snapshot_result& snap, const grpc::Status& st);
  void apply(const snapshot_result& snap);
  void failed(snapshot_result& snap, const grpc::Status& st);
  // Under mtx_: apply `m` if it is the next position, else resync. `live`:
  // it just arrived (else it was held while a snapshot was taken).
  void follow(cluster::kv_plane_message m, bool live);
  // follow()'s decision; the name `router.kv_receive` records as outcome.
  const char* follow_batch(cluster::kv_plane_message& m, bool live,
                           size_t* events);
  void request_resync(const std::string& reason); // under mtx_
  void deliver(int rank, bool reset, const openengine::v1::KvEventBatch& b);

  cluster::worker_record record_;
  runtime::slot_ptr<kv_router_actor> router_;
  // A traced batch's receipt (`router.kv_receive`, under the sidecar's
  // `sidecar.kv_publish`); null: none recorded.
  std::shared_ptr<trace::tracer> tracer_;
  std::shared_ptr<grpc::Channel> channel_;
  in_flight pending_; // the snapshot call and the back-off alarm
  std::mutex mtx_;
  bool stopping_ = false;      // guarded by mtx_
  bool following_ = false;     // guarded by mtx_
  bool snapshotting_ = false;  // guarded by mtx_
  bool backing_off_ = false;   // guarded by mtx_
  bool start_pending_ = false; // guarded by mtx_
  std::string resync_reason_;  // guarded by mtx_; empty: none asked
  std::deque<cluster::kv_plane_message> held_; // guarded by mtx_
  uint64_t epoch_ = 0, position_ = 0;          // guarded by mtx_
  uint64_t retired_epoch_ = 0;                 // guarded by mtx_
  std::chrono::milliseconds backoff_{200};     // guarded by mtx_
  uint64_t attempts_ = 0;                      // guarded by mtx_
  std::shared_ptr<grpc::ClientContext> call_;  // guarded by mtx_
  rearmable_alarm pause_;                      // guarded by mtx_
  // The worker is told to the router actor with its first events (its
  // relay answered as a relay): never before, so a record whose relay no
  // one answers is never placed on. Held across both sends, so the worker
  // is known before its events arrive.
  std::mutex announce_mtx_;
  bool announced_ = false; // guarded by announce_mtx_
};

} // namespace outrider::router
