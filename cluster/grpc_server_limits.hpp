#pragma once

// Limits every gRPC listener of outrider sets (the router's gRPC frontend,
// the sidecar's relay): connections that carry no call are closed after
// an idle time, and one that does not finish its handshake in time is
// dropped, so idle or silent peers cannot hold descriptors for ever.

#include <chrono>
#include <climits>

#include <grpcpp/server_builder.h>

namespace outrider::cluster {

struct grpc_server_limits {
  /// A connection with no call in progress for this long is closed (a
  /// GOAWAY, then the socket): --grpc-idle-timeout.
  std::chrono::milliseconds idle_timeout{std::chrono::minutes{5}};
  /// A connection that has not finished its handshake (TLS, then the
  /// HTTP/2 preface and settings) by then is dropped.
  std::chrono::milliseconds handshake_timeout{std::chrono::seconds{10}};
};

inline int clamp_ms(std::chrono::milliseconds d) {
  return d.count() > INT_MAX ? INT_MAX : static_cast<int>(d.count());
}

inline void apply(grpc::ServerBuilder& b, const grpc_server_limits& l) {
  if (l.idle_timeout.count() > 0)
    b.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS,
                         clamp_ms(l.idle_timeout));
  if (l.handshake_timeout.count() > 0)
    b.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS,
                         clamp_ms(l.handshake_timeout));
}

} // namespace outrider::cluster
