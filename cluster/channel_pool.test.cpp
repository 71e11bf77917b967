#include "cluster/channel_pool.hpp"

#include <atomic>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <grpcpp/create_channel.h>

#include "cluster/tls.hpp"

using outrider::cluster::channel_pool;

namespace {

std::atomic<int> made{0};

// A real channel (gRPC connects lazily: nothing is dialled here), counted.
std::shared_ptr<grpc::Channel>
counted(const std::string& endpoint,
        const std::shared_ptr<grpc::ChannelCredentials>& creds,
        const std::string&) {
  ++made;
  return grpc::CreateChannel(endpoint, creds);
}

} // namespace

// [grpc-threads]: each test makes real gRPC channels, which start gRPC's
// own threads: left out of the ThreadSanitizer run (scripts/test), where
// Debian's uninstrumented gRPC and Abseil report races on their own
// synchronisation (here Abseil's deadlock graph, as a channel is made while
// gRPC's threads take their locks; docs/testing.md). The pool itself is
// one std::mutex around its map.
TEST_CASE("channel_pool: one channel per endpoint, credentials and name",
          "[grpc-threads]") {
  made = 0;
  channel_pool pool{&counted};
  auto creds = grpc::InsecureChannelCredentials();
  auto a = pool.get("127.0.0.1:9", creds, "");
  auto b = pool.get("127.0.0.1:9", creds, "");
  CHECK(a == b);
  CHECK(made == 1);
  // Any of the three differing is another channel.
  auto other_port = pool.get("127.0.0.1:10", creds, "");
  auto other_name = pool.get("127.0.0.1:9", creds, "relay.example");
  auto other_creds =
    pool.get("127.0.0.1:9", grpc::InsecureChannelCredentials(), "");
  CHECK(other_port != a);
  CHECK(other_name != a);
  CHECK(other_creds != a);
  CHECK(made == 4);
  CHECK(pool.live() == 4);
}

TEST_CASE("channel_pool: a channel nobody holds goes, and is made anew",
          "[grpc-threads]") {
  made = 0;
  channel_pool pool{&counted};
  auto creds = grpc::InsecureChannelCredentials();
  std::weak_ptr<grpc::Channel> first = pool.get("127.0.0.1:9", creds, "");
  CHECK(first.expired()); // the pool does not keep it alive
  CHECK(pool.live() == 0);
  auto again = pool.get("127.0.0.1:9", creds, "");
  CHECK(made == 2);
  CHECK(pool.entries() == 1); // the same entry, refilled
}

TEST_CASE("channel_pool: a churning fleet's dead entries stay bounded",
          "[grpc-threads]") {
  channel_pool pool{&counted};
  auto creds = grpc::InsecureChannelCredentials();
  std::vector<std::shared_ptr<grpc::Channel>> held;
  for (int i = 0; i < 100; ++i)
    held.push_back(
      pool.get("127.0.0.1:" + std::to_string(1000 + i), creds, ""));
  // 2,000 workers come and go, none held for long.
  for (int i = 0; i < 2000; ++i)
    pool.get("127.0.0.1:" + std::to_string(20000 + i), creds, "");
  CHECK(pool.live() == 100);
  CHECK(pool.entries() <= 2 * 100 + 64);
  for (int i = 0; i < 100; ++i)
    CHECK(pool.get("127.0.0.1:" + std::to_string(1000 + i), creds, "") ==
          held[i]);
}

TEST_CASE("channel_pool: threads asking at once share one channel",
          "[grpc-threads]") {
  made = 0;
  channel_pool pool{&counted};
  auto creds = grpc::InsecureChannelCredentials();
  std::vector<std::shared_ptr<grpc::Channel>> got(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < got.size(); ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i)
        got[t] = pool.get("127.0.0.1:9", creds, "");
    });
  for (auto& t : threads)
    t.join();
  for (const auto& g : got)
    CHECK(g == got[0]);
  CHECK(made == 1);
}

TEST_CASE("relay_channel: the router's parts share a sidecar's channel",
          "[grpc-threads]") {
  // What the KV stream, the load poller and the dispatcher each ask for.
  auto creds = grpc::InsecureChannelCredentials();
  auto kv = outrider::cluster::relay_channel("127.0.0.1:9", creds, "");
  auto load = outrider::cluster::relay_channel("127.0.0.1:9", creds, "");
  auto dispatch = outrider::cluster::relay_channel("127.0.0.1:9", creds, "");
  CHECK(kv == load);
  CHECK(kv == dispatch);
  CHECK(outrider::cluster::relay_channel("127.0.0.1:10", creds, "") != kv);
}
