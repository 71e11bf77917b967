#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include <grpcpp/channel.h>
#include <grpcpp/security/credentials.h>

namespace outrider::cluster {

/// Channels to relays shared by every part of a process that talks to the
/// same one: the router's KV stream, its load polls and its dispatch each
/// asked for their own channel to a sidecar, and a gRPC channel costs
/// about 10 KB before its first call (its filter stack, resolver, load
/// balancer, registered methods, channelz node: heaptrack at 2,000
/// simulated workers, docs/benchmarks.md). The TCP connection was shared
/// already (gRPC's global subchannel pool keys it by address and
/// arguments); this shares the channel above it, so a fleet of N sidecars
/// costs N channels, not 3N.
///
/// One channel per (endpoint, credentials object, TLS server name) while
/// anyone holds it: entries hold the channel weakly, and the credentials
/// strongly (so that a new credentials object, after a reload, can never
/// take an old one's address and its channels). Expired entries are swept
/// as the pool grows. Thread-safe.
class channel_pool {
 public:
  using make_fn = std::shared_ptr<grpc::Channel> (*)(
    const std::string& endpoint,
    const std::shared_ptr<grpc::ChannelCredentials>& creds,
    const std::string& server_name);

  explicit channel_pool(make_fn make) : make_(make) {}

  /// The live channel for these, or a new one made with `make`.
  std::shared_ptr<grpc::Channel>
  get(const std::string& endpoint,
      const std::shared_ptr<grpc::ChannelCredentials>& creds,
      const std::string& server_name);

  /// Entries held, expired ones not yet swept included (tests).
  size_t entries() const;
  /// Channels alive (tests).
  size_t live() const;

 private:
  struct entry {
    std::shared_ptr<grpc::ChannelCredentials> creds;
    std::string server_name;
    std::weak_ptr<grpc::Channel> channel;
  };
  void sweep();

  make_fn make_;
  mutable std::mutex mtx_;
  std::unordered_multimap<std::string, entry> by_endpoint_;
  // Entries at the last sweep: the next comes when there are twice as
  // many, so a churning fleet's dead entries stay bounded by its live
  // ones (amortised: each sweep walks what was added since).
  size_t swept_at_ = 0;
};

} // namespace outrider::cluster
