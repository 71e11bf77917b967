#pragma once

// A real nats-server 2.9 with JetStream on a free loopback port, its store
// in a temporary directory; start() again after a kill keeps the store.

#include <catch2/catch.hpp>

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

} // namespace outrider::test
