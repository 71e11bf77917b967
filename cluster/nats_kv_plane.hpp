#pragma once

// The NATS event plane (`--event-plane nats`): each sidecar publishes its
// KV batches on `<prefix>.<worker id>`, numbered by its event hub (epoch,
// position); routers subscribe to `<prefix>.>`. A message carries its
// numbering in headers and the batch as a serialized
// openengine.v1.KvEventBatch; a heartbeat (no batch) repeats the last
// position, so a router notices a lost last message too. A traced batch
// carries its publisher's span in a `traceparent` header. Best effort by
// design: NATS core drops what a slow or disconnected subscriber misses,
// and routers resynchronise from a sidecar's snapshot when positions skip.

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "cluster/nats_link.hpp"

namespace outrider::cluster {

struct kv_plane_message {
  std::string worker_id;
  uint64_t epoch = 0;
  uint64_t position = 0;
  bool heartbeat = false;
  std::string batch; // a serialized KvEventBatch; empty for a heartbeat
  /// The publisher's span (W3C `traceparent`, as a message header) when
  /// the batch is traced; empty otherwise. Taken as it came: the receiver
  /// parses it (trace::parse_traceparent).
  std::string traceparent;
};

class nats_kv_plane {
 public:
  using handler = std::function<void(kv_plane_message)>;

  explicit nats_kv_plane(nats_config cfg);
  ~nats_kv_plane();
  nats_kv_plane(const nats_kv_plane&) = delete;
  nats_kv_plane& operator=(const nats_kv_plane&) = delete;

  /// Connects (in the background when no server answers yet).
  caf::error open();
  /// Best effort; false when NATS refused it (too big, closed). While
  /// reconnecting NATS.c buffers what is published.
  bool publish(const kv_plane_message& m);
  /// Every worker's messages, on NATS's delivery thread, in order per
  /// worker. Malformed ones are counted and dropped. Call once, after open.
  caf::error subscribe(handler on_message);
  bool connected() const { return link_.connected(); }
  /// `<prefix>.<worker id>`: where a worker's batches go.
  std::string subject_of(const std::string& worker_id) const {
    return cfg_.kv_subject + "." + worker_id;
  }
  /// Counts connections made (first and re-): when it moves, what was
  /// published meanwhile is lost to this subscriber.
  uint64_t connections() const { return connections_.load(); }

 private:
  nats_config cfg_;
  std::atomic<uint64_t> connections_{0};
  nats_link link_;
  handler on_message_;
};

/// Reads a message's headers; nullopt when they are missing or malformed.
std::optional<kv_plane_message> kv_plane_decode(const std::string& subject,
                                                const char* epoch,
                                                const char* position,
                                                const char* heartbeat);

} // namespace outrider::cluster
