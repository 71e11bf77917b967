#pragma once

// A real nats-server 2.9 with JetStream on a free loopback port, its store
// in a temporary directory; start() again after a kill keeps the store.

#include <catch2/catch.hpp>

#include "tests/e2e/router_cluster.hpp"
#include "tests/e2e/sidecar_process.hpp"

namespace outrider::test {

struct nats_server {
  uint16_t port = free_port();
  temp_dir store;
  std::unique_ptr<child_process> proc;
  nats_server() { start(); }
  void start() {
    proc = std::make_unique<child_process>(std::vector<std::string>{
      "/usr/sbin/nats-server", "-a", "127.0.0.1", "-p", std::to_string(port),
      "-js", "-sd", store.str()});
    REQUIRE(
      eventually([&] { return accepting(port); }, std::chrono::seconds{10}));
  }
  std::string url() const { return "nats://127.0.0.1:" + std::to_string(port); }
};

// NATS discovery and the NATS event plane, as a fleet runs.
inline std::vector<std::string> fleet_flags(const nats_server& n) {
  return {"--discovery",     "nats", "--nats-url",    n.url(),
          "--discovery-ttl", "2s",   "--event-plane", "nats"};
}

// Another router on the same fleet, with its own ports.
struct extra_router {
  uint16_t http = free_port();
  uint16_t status = free_port();
  child_process proc;
  explicit extra_router(const std::vector<std::string>& flags)
    : proc([&] {
        std::vector<std::string> a{OUTRIDER_BIN,
                                   "--role",
                                   "router",
                                   "--http-port",
                                   std::to_string(http),
                                   "--system-port",
                                   std::to_string(status),
                                   "--grpc-port",
                                   "0"};
        a.insert(a.end(), flags.begin(), flags.end());
        return a;
      }()) {
    REQUIRE(eventually([&] { return http_get(status, "/ready") == 200; },
                       std::chrono::seconds{10}));
  }
};

} // namespace outrider::test
