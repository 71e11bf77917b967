#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "actors/sidecar/event_hub.hpp"
#include "cluster/nats_kv_plane.hpp"
#include "cluster/trace/tracer.hpp"
#include "openengine.pb.h"

namespace outrider::sidecar {

/// A batch as OpenEngine's message (the relay's stream and the NATS plane).
void batch_to_proto(const indexer::kv_batch& b,
                    openengine::v1::KvEventBatch* out);

/// `--event-plane nats`, the sidecar's side: follows the event hub and
/// publishes every batch, numbered, on the worker's subject; once a second
/// a heartbeat repeats the last position. A publisher that falls behind
/// the hub (its queue overflows) starts again from the live end: routers
/// see the positions skip and resynchronise from a snapshot. A batch is
/// traced at the sample ratio (`sidecar.kv_publish`, a producer span whose
/// context goes with the message; the router's `router.kv_receive` hangs
/// under it).
class kv_publisher {
 public:
  kv_publisher(std::shared_ptr<event_hub> hub,
               std::shared_ptr<cluster::nats_kv_plane> plane,
               std::string worker_id,
               std::shared_ptr<trace::tracer> tracer = nullptr);
  ~kv_publisher(); // stops the thread

  kv_publisher(const kv_publisher&) = delete;
  kv_publisher& operator=(const kv_publisher&) = delete;

 private:
  void run();
  void resubscribe();

  std::shared_ptr<event_hub> hub_;
  std::shared_ptr<cluster::nats_kv_plane> plane_;
  std::string worker_id_;
  std::shared_ptr<trace::tracer> tracer_; // null: nothing traced
  std::shared_ptr<kv_subscription> sub_;
  // Shared with the wake-up the hub may still be calling after we are gone.
  struct wake {
    std::mutex mtx;
    std::condition_variable cv;
    bool pending = false;  // guarded by mtx
    bool stopping = false; // guarded by mtx
  };
  std::shared_ptr<wake> wake_ = std::make_shared<wake>();
  std::thread thread_;
};

} // namespace outrider::sidecar
