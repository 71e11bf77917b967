#include "cluster/tls.hpp"

#include <catch2/catch.hpp>

using outrider::cluster::channel_target;

TEST_CASE("address literals are dialled without gRPC's DNS resolver") {
  CHECK(channel_target("127.0.0.1:50051") == "ipv4:127.0.0.1:50051");
  CHECK(channel_target("10.244.3.17:8001") == "ipv4:10.244.3.17:8001");
  CHECK(channel_target("[::1]:50051") == "ipv6:[::1]:50051");
  CHECK(channel_target("[fd00::7]:9") == "ipv6:[fd00::7]:9");
  // Host names, and anything that is not "literal:port", go as written.
  CHECK(channel_target("localhost:50051") == "localhost:50051");
  CHECK(channel_target("relay.ns.svc:50051") == "relay.ns.svc:50051");
  CHECK(channel_target("127.0.0.1") == "127.0.0.1");
  CHECK(channel_target("127.0.0.1:") == "127.0.0.1:");
  CHECK(channel_target("127.0.0.1:x1") == "127.0.0.1:x1");
  CHECK(channel_target("1.2.3:80") == "1.2.3:80");
  CHECK(channel_target("::1:80") == "::1:80");
  CHECK(channel_target("[not-v6]:80") == "[not-v6]:80");
  CHECK(channel_target("dns:///10.0.0.1:80") == "dns:///10.0.0.1:80");
  CHECK(channel_target("unix:/tmp/s.sock") == "unix:/tmp/s.sock");
}
