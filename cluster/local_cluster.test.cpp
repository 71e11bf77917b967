// The ports --role all hands its engines: distinct, and free when given.
#include "cluster/local_cluster.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <set>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

using namespace outrider::cluster;

namespace {

bool can_listen(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
            listen(fd, 1) == 0;
  close(fd);
  return ok;
}

} // namespace

TEST_CASE("local cluster: the ports handed out are distinct and free",
          "[local_cluster]") {
  // 8 engines' worth (gRPC, KV events, replay each), many times: one port
  // handed out twice would be an engine that never starts.
  for (int round = 0; round < 50; ++round) {
    auto ports = free_loopback_ports(24);
    REQUIRE(ports.size() == 24);
    std::set<uint16_t> distinct(ports.begin(), ports.end());
    CHECK(distinct.size() == ports.size());
    CHECK(distinct.count(0) == 0);
  }
  for (auto p : free_loopback_ports(8))
    CHECK(can_listen(p));
  CHECK(free_loopback_ports(0).empty());
}
