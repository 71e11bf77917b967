// `--discovery nats` against a real nats-server 2.9 with JetStream: routers
// see workers come and go as they happen, expire a killed worker's record
// themselves (the server sends nothing on expiry), keep their last known
// set while NATS is down (and say so in /health), and sidecars register
// again once NATS is back.

#include <csignal>
#include <thread>

#include "tests/e2e/nats_server.hpp"
#include "tests/e2e/router_cluster.hpp"
#include "tests/e2e/test_pki.hpp"

using namespace outrider::test;
using json = nlohmann::json;

namespace {

std::vector<std::string> nats_flags(const nats_server& n) {
  return {"--discovery",     "nats", "--nats-url", n.url(),
          "--discovery-ttl", "2s"};
}

std::string health(uint16_t port) {
  std::string body;
  http_get(port, "/health", &body);
  return body;
}

// How long after `first` holds `then` holds too (both polled together);
// a large value when either never does within `timeout`.
template <class First, class Then>
std::chrono::milliseconds lag(First first, Then then,
                              std::chrono::milliseconds timeout) {
  using clock = std::chrono::steady_clock;
  auto deadline = clock::now() + timeout;
  std::optional<clock::time_point> at;
  while (clock::now() < deadline) {
    if (!at && first())
      at = clock::now();
    if (at && then())
      return std::chrono::duration_cast<std::chrono::milliseconds>(
        clock::now() - *at);
    std::this_thread::sleep_for(std::chrono::milliseconds{2});
  }
  return timeout;
}

} // namespace

TEST_CASE("nats discovery: workers come and go, a router outlives a NATS "
          "outage and sidecars register again") {
  nats_server nats;
  auto flags = nats_flags(nats);
  cluster c{1, {}, flags, flags};
  REQUIRE(eventually(
    [&] { return c.router_metric("outrider_router_workers") == 1; }, 15s));
  CHECK(c.complete(tokens(1, 16), 3)["choices"].size() == 1);
  CHECK(health(c.router_status).find("connected") != std::string::npos);

  // A second worker appears as it registers.
  sim_process sim2{{}};
  REQUIRE(sim2.wait_serving(10s));
  auto extra = flags;
  extra.insert(extra.end(), {"--worker-id", "worker-9"});
  auto side2 =
    std::make_unique<sidecar_process>(sim2.endpoint(), nullptr, extra);
  // Seen by the router within 500 ms of registering (/ready turns 200
  // once the record is put).
  auto seen =
    lag([&] { return side2->get("/ready") == 200; },
        [&] { return c.router_metric("outrider_router_workers") == 2; }, 15s);
  WARN("registration seen after " << seen.count() << " ms");
  CHECK(seen < 500ms * time_allowance);
  // Killed -9, it never deletes its key: the router expires it itself
  // within the TTL (2 s), though the server tells nobody.
  side2->proc->signal(SIGKILL);
  REQUIRE(side2->proc->wait(5s));
  auto killed = std::chrono::steady_clock::now();
  REQUIRE(eventually(
    [&] { return c.router_metric("outrider_router_workers") == 1; }, 15s));
  // At most the TTL after its last keep-alive, plus the watcher's turn.
  CHECK(std::chrono::steady_clock::now() - killed < 3s);

  // NATS goes away: the router keeps the worker it knew and serves.
  nats.proc->signal(SIGKILL);
  REQUIRE(nats.proc->wait(5s));
  REQUIRE(eventually(
    [&] {
      return health(c.router_status).find("disconnected") != std::string::npos;
    },
    15s));
  std::this_thread::sleep_for(3s); // longer than the TTL
  CHECK(c.router_metric("outrider_router_workers") == 1);
  CHECK(c.complete(tokens(100, 16), 3)["choices"].size() == 1);
  CHECK(c.sides[0]->get("/ready") == 200); // the sidecar serves its engine
  CHECK(health(c.sides[0]->port).find("disconnected") != std::string::npos);

  // NATS is back (its storage kept): everyone reconnects, the sidecar's
  // keep-alive puts its record again, the router follows the bucket.
  nats.start();
  REQUIRE(eventually(
    [&] {
      return health(c.router_status).find("\"connected") != std::string::npos;
    },
    20s));
  CHECK(c.router_metric("outrider_router_workers") == 1);
  CHECK(c.complete(tokens(200, 16), 3)["choices"].size() == 1);

  // A clean stop deletes the key: the router sees the worker leave within
  // 500 ms of its deregistering (/ready turns 503 just before). The
  // sidecar reconnects on its own back-off: a delete sent while it is
  // still away waits for it.
  REQUIRE(eventually(
    [&] {
      return health(c.sides[0]->port).find("\"connected") != std::string::npos;
    },
    20s));
  c.sides[0]->proc->signal(SIGTERM);
  auto gone =
    lag([&] { return c.sides[0]->get("/ready") != 200; },
        [&] { return c.router_metric("outrider_router_workers") == 0; }, 15s);
  WARN("deregistration seen after " << gone.count() << " ms");
  CHECK(gone < 500ms);
  REQUIRE(c.sides[0]->proc->wait(15s));
  if (gone >= 500ms)
    WARN("the sidecar's log:\n" << c.sides[0]->proc->output());
}

TEST_CASE("the fleet config files run as they are: NATS discovery and mutual "
          "TLS") {
  nats_server nats;
  pki certs;
  // As docs/kubernetes.md asks: one certificate naming outrider-worker
  // (the relays are dialled at addresses no certificate names).
  certs.make_leaf("tls", "ca", "DNS:outrider-worker");
  sim_process sim{{}};
  REQUIRE(sim.wait_serving(10s));
  // Only addresses, ports, directories and certificate paths differ from
  // deploy/fleet-*.yaml (tests bind loopback only).
  std::vector<std::string> here{"--nats-url",    nats.url(),
                                "--system-host", "127.0.0.1",
                                "--tls-cert",    certs.path("tls.crt"),
                                "--tls-key",     certs.path("tls.key"),
                                "--tls-ca",      certs.path("ca.crt")};
  auto side_flags = here;
  side_flags.insert(side_flags.end(),
                    {"--config",
                     OUTRIDER_SOURCE_DIR "/deploy/fleet-sidecar.yaml",
                     "--relay-host", "127.0.0.1"});
  sidecar_process side{sim.endpoint(), nullptr, side_flags};
  REQUIRE(eventually([&] { return side.get("/ready") == 200; }, 15s));
  auto http_port = free_port();
  auto status = free_port();
  auto router_flags = here;
  router_flags.insert(
    router_flags.begin(),
    {OUTRIDER_BIN, "--config", OUTRIDER_SOURCE_DIR "/deploy/fleet-router.yaml",
     "--http-host", "127.0.0.1", "--http-port", std::to_string(http_port),
     "--grpc-port", "0", "--system-port", std::to_string(status)});
  child_process router{router_flags};
  REQUIRE(eventually(
    [&] { return metric_value(status, "outrider_router_workers") == 1; }, 20s));
  auto [code, body] =
    http(http_port, "POST", "/v1/completions",
         json{{"prompt", tokens(1, 16)}, {"max_tokens", 3}}.dump());
  INFO(body);
  CHECK(code == 200);
}
