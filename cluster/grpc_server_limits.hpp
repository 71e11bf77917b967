#pragma once

// Limits every gRPC listener of outrider sets (the router's gRPC frontend,
// the sidecar's relay): connections that carry no call are closed after
// an idle time, and one that does not finish its handshake in time is
// dropped, so idle or silent peers cannot hold descriptors for ever; the
// server's memory is bounded by a quota (gRPC refuses new connections and
// reclaims from idle ones near it); each listener is probed from outside
// (runtime/listener_watch.hpp), since gRPC 1.51's stops for good when an
// accept fails.

#include <chrono>
#include <climits>
#include <string>

#include <grpcpp/resource_quota.h>
#include <grpcpp/server_builder.h>

namespace outrider::cluster {

struct grpc_server_limits {
  /// A connection with no call in progress for this long is closed (a
  /// GOAWAY, then the socket): --grpc-idle-timeout.
  std::chrono::milliseconds idle_timeout{std::chrono::minutes{5}};
  /// A connection that has not finished its handshake (TLS, then the
  /// HTTP/2 preface and settings) by then is dropped.
  std::chrono::milliseconds handshake_timeout{std::chrono::seconds{10}};
  /// The gRPC memory of this server (connections' and calls' buffers):
  /// near it, gRPC closes idle connections and new ones as they come (an
  /// idle connection holds about 14 KB: docs/testing.md). 0: unbounded.
  /// --grpc-memory-quota.
  size_t memory_quota = size_t{1} << 30;
  /// How often the listener is probed from a fresh connection (0: never).
  /// --listener-probe-interval.
  std::chrono::milliseconds probe_interval{std::chrono::seconds{5}};
  /// The process's last descriptors a connection to this listener may not
  /// take, where the accept loop is outrider's (plaintext on an IP
  /// address: cluster/grpc_listener.hpp); 0: gRPC's own listener always.
  size_t fd_reserve = 64;
};

inline int clamp_ms(std::chrono::milliseconds d) {
  return d.count() > INT_MAX ? INT_MAX : static_cast<int>(d.count());
}

inline void apply(grpc::ServerBuilder& b, const grpc_server_limits& l,
                  const std::string& name) {
  if (l.memory_quota > 0) {
    grpc::ResourceQuota quota{"outrider-" + name};
    quota.Resize(l.memory_quota);
    b.SetResourceQuota(quota);
  }
  if (l.idle_timeout.count() > 0)
    b.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS,
                         clamp_ms(l.idle_timeout));
  if (l.handshake_timeout.count() > 0)
    b.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS,
                         clamp_ms(l.handshake_timeout));
}

} // namespace outrider::cluster
