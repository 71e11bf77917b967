// Issue 33, row 1: idle connections against outrider's gRPC listeners (the
// router's --grpc-port, a sidecar's relay). Idle ones are closed after
// --grpc-idle-timeout. A plaintext listener accepts on outrider's own loop,
// which leaves the process its last descriptors (--grpc-fd-reserve); one on
// gRPC's own listener (TLS, or --grpc-fd-reserve 0) that ran out of
// descriptors (gRPC 1.51's stops accepting for good when accept() fails) is
// found by its probe, withdraws the sidecar and is rebuilt on its port. A
// flood of HTTP connections to the frontend leaves the process its last
// descriptors.

#include <algorithm>
#include <atomic>
#include <dirent.h>
#include <filesystem>
#include <sys/resource.h>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "openengine.grpc.pb.h"
#include "tests/e2e/router_cluster.hpp"
#include "tests/e2e/sidecar_process.hpp"
#include "tests/e2e/sim_process.hpp"
#include "tests/raw_client.hpp"

using namespace outrider::test;
using namespace std::string_literals;

namespace {

// The HTTP/2 client preface and an empty SETTINGS frame.
const std::string h2_preface =
  "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"s + std::string("\0\0\0\4\0\0\0\0\0", 9);

long open_descriptors(pid_t pid) {
  long n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(
         "/proc/" + std::to_string(pid) + "/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++n;
  return n;
}

// Lowers `pid`'s descriptor limit (soft and hard) to what it has open now
// plus `spare`; the limit set.
long limit_descriptors(pid_t pid, long spare) {
  rlimit lim{};
  lim.rlim_cur = lim.rlim_max =
    static_cast<rlim_t>(open_descriptors(pid) + spare);
  REQUIRE(prlimit(pid, RLIMIT_NOFILE, &lim, nullptr) == 0);
  return static_cast<long>(lim.rlim_cur);
}

// One call on a channel of its own (no connection shared with an earlier
// one): the server's GetServerInfo (relay) or a 2-token Generate (router).
bool fresh_call(uint16_t port, bool relay, std::chrono::seconds deadline) {
  static std::atomic<int> n{0};
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt("outrider.test.fresh", n++);
  auto ch = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port),
                                      grpc::InsecureChannelCredentials(), args);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + deadline);
  if (relay) {
    auto stub = openengine::v1::Control::NewStub(ch);
    openengine::v1::ServerInfo info;
    return stub->GetServerInfo(&ctx, {}, &info).ok();
  }
  auto stub = openengine::v1::Inference::NewStub(ch);
  openengine::v1::GenerateRequest req;
  for (uint32_t t : tokens(1, 8))
    req.mutable_token_ids()->add_ids(t);
  req.mutable_stopping()->set_max_tokens(2);
  auto reader = stub->Generate(&ctx, req);
  openengine::v1::GenerateResponse resp;
  while (reader->Read(&resp)) {
  }
  return reader->Finish().ok();
}

// Fills `pid`'s descriptors with idle HTTP/2 connections to `port` (more
// than its limit allows), holds them until the process has none left,
// then closes them all.
void exhaust_descriptors(pid_t pid, uint16_t port, long limit) {
  std::vector<std::unique_ptr<raw_client>> idle;
  const long n = 2 * (limit - open_descriptors(pid)) + 50;
  for (long i = 0; i < n; ++i) {
    idle.push_back(std::make_unique<raw_client>(port));
    if (idle.back()->connected())
      idle.back()->send(h2_preface);
  }
  size_t connected = 0;
  for (auto& c : idle)
    connected += c->connected();
  INFO("connected " << connected << " of " << idle.size() << ", open "
                    << open_descriptors(pid) << " of " << limit);
  CHECK(eventually([&] { return open_descriptors(pid) >= limit - 2; }, 10s));
  idle.clear();
}

} // namespace

TEST_CASE("row 1: gRPC connections that carry no call are closed after "
          "--grpc-idle-timeout, on the router's gRPC port and a sidecar's "
          "relay, and calls work after") {
  cluster c{
    1, {}, {"--grpc-idle-timeout", "1s"}, {"--grpc-idle-timeout", "1s"}};
  std::vector<std::unique_ptr<raw_client>> idle;
  for (int i = 0; i < 20; ++i)
    for (uint16_t port : {c.grpc_port, c.sides[0]->relay_port}) {
      idle.push_back(std::make_unique<raw_client>(port));
      REQUIRE(idle.back()->connected());
      REQUIRE(idle.back()->send(h2_preface));
    }
  // Open before the timeout, closed soon after it.
  CHECK_FALSE(idle.front()->closed_within(300ms));
  int closed = 0;
  for (auto& conn : idle)
    closed += conn->closed_within(10s) ? 1 : 0;
  CHECK(closed == 40);
  // The router's own channels to the relay were idle as long: they come
  // back for the next call.
  CHECK(c.complete(tokens(1, 8), 2)["choices"].size() == 1);
}

TEST_CASE("row 1: a plaintext gRPC listener keeps the process's last "
          "descriptors: connections past --grpc-fd-reserve are closed, the "
          "process stays ready and its listener never stops") {
  cluster c{1,
            {},
            {"--listener-probe-interval", "300ms"},
            {"--listener-probe-interval", "300ms"}};
  auto& side = *c.sides[0];
  REQUIRE(fresh_call(side.relay_port, true, 5s));
  REQUIRE(fresh_call(c.grpc_port, false, 10s));
  // Floods `port` of `pid` with twice as many idle connections as it has
  // descriptors left; while they are open the process keeps its last ones
  // (the reserve is 64) and its /ready stays 200; once they close, a fresh
  // call is served.
  auto flood = [&](pid_t pid, uint16_t port, const std::string& listener,
                   auto metric, auto ready, bool relay) {
    auto limit = limit_descriptors(pid, 200);
    std::vector<std::unique_ptr<raw_client>> idle;
    for (long i = 0; i < 400; ++i) {
      idle.push_back(std::make_unique<raw_client>(port));
      if (idle.back()->connected())
        idle.back()->send(h2_preface);
    }
    auto refused = "outrider_accept_refused_total{listener=\"" + listener +
                   "\",reason=\"descriptor_reserve\"}";
    CHECK(eventually([&] { return metric(refused) >= 1; }, 10s));
    auto open = open_descriptors(pid);
    INFO("open " << open << " of " << limit);
    CHECK(open <= limit - 32);
    CHECK(ready() == 200);
    idle.clear();
    CHECK(eventually([&] { return fresh_call(port, relay, 2s); }, 20s));
    auto failures =
      "outrider_listener_failures_total{listener=\"" + listener + "\"}";
    CHECK(metric(failures) == 0);
  };

  SECTION("the sidecar's relay") {
    flood(
      side.proc->pid(), side.relay_port, "relay",
      [&](const std::string& m) { return side.metric(m).value_or(0); },
      [&] { return side.get("/ready"); }, true);
    CHECK(c.complete(tokens(1, 8), 2)["choices"].size() == 1);
  }

  SECTION("the router's --grpc-port") {
    flood(
      c.router->pid(), c.grpc_port, "grpc",
      [&](const std::string& m) { return c.router_metric(m); },
      [&] { return http_get(c.router_status, "/ready"); }, false);
  }
}

TEST_CASE("row 1: on gRPC's own listener (TLS, or --grpc-fd-reserve 0), a "
          "listener that ran out of descriptors is found by its probe (the "
          "sidecar withdrawn meanwhile) and rebuilt on its port: new "
          "connections are served again") {
  // These processes run out of descriptors on purpose: UBSan's vptr check
  // cannot work there (see vptr_check_off).
  vptr_check_off no_vptr_check;
  cluster c{1,
            {},
            {"--listener-probe-interval", "300ms", "--grpc-fd-reserve", "0"},
            {"--listener-probe-interval", "300ms", "--grpc-fd-reserve", "0"}};
  auto& side = *c.sides[0];
  REQUIRE(fresh_call(side.relay_port, true, 5s));
  REQUIRE(fresh_call(c.grpc_port, false, 10s));

  SECTION("the sidecar's relay") {
    auto limit = limit_descriptors(side.proc->pid(), 80);
    exhaust_descriptors(side.proc->pid(), side.relay_port, limit);
    // Withdrawn while its relay takes no connection, ready again after.
    bool unready_seen = false;
    CHECK(eventually(
      [&] {
        unready_seen = unready_seen || side.get("/ready") == 503;
        return unready_seen && side.get("/ready") == 200 &&
               fresh_call(side.relay_port, true, 2s);
      },
      std::chrono::milliseconds{static_cast<long>(60000 * time_allowance)}));
    // Its log from the first report of a sanitizer or a fatal error, if
    // any, else its end.
    auto log = side.proc->output();
    auto at = std::min({log.find("ERROR: "), log.find("runtime error"),
                        log.find("terminate called")});
    if (at == std::string::npos)
      at = log.size() > 4000 ? log.size() - 4000 : 0;
    UNSCOPED_INFO("sidecar's log: " << log.substr(at, 6000));
    CHECK(unready_seen);
    CHECK(side.metric("outrider_listener_failures_total{listener=\"relay\"}")
            .value_or(0) >= 1);
    CHECK(side.metric("outrider_listener_restarts_total{listener=\"relay\"}")
            .value_or(0) >= 1);
    CHECK(side.metric("outrider_listener_accepting{listener=\"relay\"}")
            .value_or(0) == 1);
    // The router comes back to it.
    CHECK(eventually(
      [&] { return c.complete(tokens(1, 8), 2)["choices"].size() == 1; }, 20s));
  }

  SECTION("the router's --grpc-port") {
    auto limit = limit_descriptors(c.router->pid(), 80);
    exhaust_descriptors(c.router->pid(), c.grpc_port, limit);
    CHECK(eventually(
      [&] { return fresh_call(c.grpc_port, false, 2s); },
      std::chrono::milliseconds{static_cast<long>(60000 * time_allowance)}));
    CHECK(c.router_metric(
            "outrider_listener_failures_total{listener=\"grpc\"}") >= 1);
    CHECK(c.router_metric(
            "outrider_listener_restarts_total{listener=\"grpc\"}") >= 1);
    CHECK(eventually([&] { return http_get(c.router_status, "/ready") == 200; },
                     10s));
  }
}

TEST_CASE("row 1: a sidecar's --grpc-memory-quota bounds the idle "
          "connections its relay holds, and calls are still served") {
  // Measured: an idle HTTP/2 connection holds about 14 KB of the quota
  // (4 MiB kept about 300 of 400); beyond, gRPC closes idle ones.
  sim_process sim{{}};
  REQUIRE(sim.wait_serving(10s));
  sidecar_process side{
    sim.endpoint(), nullptr, {"--grpc-memory-quota", "2097152"}};
  REQUIRE(eventually([&] { return side.get("/ready") == 200; }, 10s));
  auto before = open_descriptors(side.proc->pid());
  std::vector<std::unique_ptr<raw_client>> idle;
  for (int i = 0; i < 400; ++i) {
    idle.push_back(std::make_unique<raw_client>(side.relay_port));
    REQUIRE(idle.back()->connected());
    idle.back()->send(h2_preface);
  }
  // Each was accepted: its SETTINGS came (or its close) ...
  for (auto& conn : idle)
    conn->read_until([](const std::string& t) { return !t.empty(); }, 5s);
  // ... and the server holds far fewer than 400 of them.
  long held = 0;
  eventually(
    [&] {
      held = open_descriptors(side.proc->pid()) - before;
      return held < 200;
    },
    10s);
  INFO("descriptors held for 400 idle connections: " << held);
  CHECK(held < 200);
  CHECK(fresh_call(side.relay_port, true, 10s));
}

TEST_CASE("row 1: a flood of HTTP connections to the frontend leaves the "
          "process its last descriptors: probes answer, the flood gets 503") {
  cluster c{1};
  auto pid = c.router->pid();
  auto limit = limit_descriptors(pid, 200);
  // Twice as many connections as descriptors are left, each idle (no
  // request yet): the frontend keeps its last 128 for the rest.
  std::vector<std::unique_ptr<raw_client>> flood;
  for (int i = 0; i < 400; ++i) {
    flood.push_back(std::make_unique<raw_client>(c.http_port));
    REQUIRE(flood.back()->connected()); // the kernel's backlog takes it
  }
  const std::string refused =
    R"(outrider_http_refused_total{)"
    R"(server="frontend",reason="descriptor_reserve"})";
  REQUIRE(eventually([&] { return c.router_metric(refused) >= 100; }, 15s));
  // Those refused were answered and closed at once.
  size_t answered = 0;
  for (auto& f : flood) {
    auto got = f->read_until(
      [](const std::string& s) { return s.find("\r\n\r\n") != s.npos; },
      std::chrono::milliseconds{50});
    if (got.rfind("HTTP/1.1 503", 0) == 0)
      ++answered;
  }
  CHECK(answered >= 100);
  // The process still has descriptors: probes and a fresh gRPC call work.
  CHECK(open_descriptors(pid) < limit);
  CHECK(http_get(c.router_status, "/live") == 200);
  CHECK(http_get(c.router_status, "/ready") == 200);
  CHECK(fresh_call(c.grpc_port, false, std::chrono::seconds{10}));
  // The flood gone, the frontend serves again.
  flood.clear();
  CHECK(eventually(
    [&] {
      return http(c.http_port, "POST", "/v1/completions",
                  nlohmann::json{{"prompt", tokens(50, 8)}, {"max_tokens", 2}}
                    .dump())
               .first == 200;
    },
    10s));
}

TEST_CASE("row 1: a gRPC port another process listens on is refused, not "
          "shared: a second engine and a router on it exit with an error") {
  // gRPC listens with SO_REUSEPORT by default on Linux; with it, the second
  // process would bind the port too and take some of its connections.
  sim_process first{{}};
  REQUIRE(first.wait_serving(allowed(10s)));
  sim_process second{{.start_now = false}};
  second.grpc = first.grpc;
  second.start();
  auto code = second.proc->wait(allowed(20s));
  REQUIRE(code);
  CHECK(*code != 0);
  CHECK(second.proc->output().find("cannot listen") != std::string::npos);
  // The router's gRPC frontend on gRPC's own listener (as with TLS).
  temp_dir discovery;
  child_process router{router_command(discovery.str(), free_port(), free_port(),
                                      first.grpc, {"--grpc-fd-reserve", "0"})};
  code = router.wait(allowed(20s));
  REQUIRE(code);
  CHECK(*code != 0);
  CHECK(router.output().find("gRPC frontend") != std::string::npos);
  // The first engine still serves, alone on its port.
  CHECK(first.wait_serving(allowed(10s)));
}

// Row 8 at a port the kernel picked: the router starts its watcher, which
// dials every record's relay, only once its frontends hold their ports, and
// takes its own address from the port bound. Before, a router given
// --http-port 0 knew itself as ":0", followed a record naming its own
// frontend, and counted it a worker.
TEST_CASE("row 8: a record naming the port a router's frontend was given by "
          "the kernel is refused as its own") {
  cluster c{1};
  auto status = free_port();
  child_process second{router_command(c.discovery.str(), 0, status, 0)};
  REQUIRE(eventually([&] { return http_get(status, "/ready") == 200; }, 30s));
  // The port bound, from the frontend's line ("frontend on HOST:PORT (").
  uint16_t bound = 0;
  REQUIRE(eventually(
    [&] {
      auto out = second.output();
      auto at = out.find("frontend on 127.0.0.1:");
      if (at == std::string::npos)
        return false;
      bound = static_cast<uint16_t>(std::stoul(
        out.substr(at + std::string{"frontend on 127.0.0.1:"}.size())));
      return bound != 0;
    },
    10s));
  REQUIRE(eventually(
    [&] { return metric_value(status, "outrider_router_workers") == 1; }, 10s));
  plant_record(c, "loop-http", "127.0.0.1:" + std::to_string(bound));
  CHECK(eventually(
    [&] {
      return metric_value(status, "outrider_discovery_self_records_total") >= 1;
    },
    10s));
  CHECK(metric_value(status, "outrider_router_workers") == 1);
}
