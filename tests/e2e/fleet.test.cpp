// `outrider-sim --fleet N` (sim/fleet/): many workers in one process, each
// with its own record, cache and KV stream, as a router meets a fleet.

#include <atomic>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "tests/e2e/nats_server.hpp"
#include "tests/e2e/raw_mux.hpp"
#include "tests/e2e/router_cluster.hpp"

using namespace outrider::test;
using json = nlohmann::json;

namespace {

// The first `n` of a prompt: the fleet's system prompt is tokens 1, 2, ...
std::vector<uint32_t> system_prompt(size_t n) {
  return tokens(1, n);
}

struct fleet_cluster {
  temp_dir discovery;
  uint16_t fleet_port = free_port();
  // Below the kernel's ephemeral range (free_port): never one of the ports
  // a fleet with --ports takes from the kernel.
  uint16_t http_port = free_port();
  uint16_t status = free_port();
  std::unique_ptr<child_process> fleet, router;

  fleet_cluster(int workers, std::vector<std::string> fleet_flags,
                std::vector<std::string> router_flags = {}) {
    std::vector<std::string> args{OUTRIDER_SIM_BIN,
                                  "--fleet",
                                  std::to_string(workers),
                                  "--grpc-port",
                                  std::to_string(fleet_port),
                                  "--discovery-dir",
                                  discovery.str(),
                                  "--block-size",
                                  "4"};
    args.insert(args.end(), fleet_flags.begin(), fleet_flags.end());
    fleet = std::make_unique<child_process>(args);
    REQUIRE(eventually([&] { return accepting(fleet_port); }, 20s));
    router = std::make_unique<child_process>(
      router_command(discovery.str(), http_port, status, 0, router_flags));
    REQUIRE(eventually([&] { return http_get(status, "/ready") == 200; }, 60s));
  }

  double metric(const std::string& series) const {
    return metric_value(status, series);
  }

  // The router knows all `workers` (their snapshots in: the shared prefix
  // of 8 blocks each) and goes on applying their churn, stamped by the
  // fleet (the router measures its lag): `batches` more.
  void check_followed(int workers, double batches) const {
    CHECK(
      eventually([&] { return metric("outrider_router_workers") == workers; },
                 allowed(30s)));
    CHECK(eventually(
      [&] { return metric("outrider_router_index_entries") >= workers * 8; },
      allowed(20s)));
    auto lagged = metric("outrider_router_kv_event_lag_seconds_count");
    CHECK(eventually(
      [&] {
        return metric("outrider_router_kv_event_lag_seconds_count") >=
               lagged + batches;
      },
      allowed(20s)));
  }

  // A prompt of its own: cached on one worker, then routed back there.
  void check_routed_back() const {
    auto own = concat(system_prompt(32), tokens(20000, 64));
    REQUIRE(complete_on(http_port, own, 2)["choices"].size() == 1);
    CHECK(eventually(
      [&] {
        auto again = complete_on(http_port, own, 2);
        return again["usage"]["prompt_tokens_details"]["cached_tokens"]
                 .get<int>() >= 92;
      },
      allowed(10s)));
  }
};

} // namespace

TEST_CASE("a fleet of 200 simulated workers: the router knows each, follows "
          "their KV churn, and places by their caches") {
  fleet_cluster c{200,
                  {"--shared-prefix-blocks", "8", "--kv-batches-per-second",
                   "2", "--kv-blocks-per-batch", "4"}};
  // Every worker announced, each one's stream answered with its
  // snapshot, the churn followed.
  c.check_followed(200, 100);
  // A prompt after the system prompt finds it cached wherever it goes.
  auto out =
    complete_on(c.http_port, concat(system_prompt(32), tokens(9000, 8)), 4);
  REQUIRE(out["choices"].size() == 1);
  CHECK(out["usage"]["prompt_tokens_details"]["cached_tokens"] == 32);
  c.check_routed_back();
  // Each decision timed.
  CHECK(c.metric("outrider_router_decision_seconds_count") >= 2);
  // Stopped, the fleet withdraws its records.
  c.fleet->signal(SIGTERM);
  REQUIRE(c.fleet->wait(20s).value_or(-1) == 0);
  CHECK(std::filesystem::is_empty(c.discovery.path));
}

TEST_CASE("a fleet on ports of its own: each worker's record names its own "
          "address, and the router follows and reaches every one") {
  fleet_cluster c{12,
                  {"--ports", "12", "--shared-prefix-blocks", "8",
                   "--kv-batches-per-second", "2", "--kv-blocks-per-batch",
                   "4"}};
  std::set<std::string> endpoints;
  for (const auto& f : std::filesystem::directory_iterator(c.discovery.path)) {
    std::ifstream in{f.path()};
    endpoints.insert(json::parse(in).at("relay_endpoint").get<std::string>());
  }
  CHECK(endpoints.size() == 12);
  CHECK(endpoints.count("127.0.0.1:" + std::to_string(c.fleet_port)) == 1);
  c.check_followed(12, 30);
  c.check_routed_back();
}

TEST_CASE("outrider-sim --fleet refuses what it cannot run") {
  temp_dir dir;
  for (std::vector<std::string> bad :
       {std::vector<std::string>{"--fleet", "0", "--discovery-dir", "x"},
        {"--fleet", "10"},
        {"--fleet", "10", "--discovery-dir", "x", "--num-gpu-blocks-override",
         "8", "--shared-prefix-blocks", "8"}}) {
    std::vector<std::string> args{OUTRIDER_SIM_BIN};
    args.insert(args.end(), bad.begin(), bad.end());
    child_process p{args};
    CHECK(p.wait(10s).value_or(-1) == 2);
  }
  // More ports than descriptors allow (two each): said, not half-served.
  child_process few{{"/bin/sh", "-c",
                     std::string{"ulimit -n 300 && exec "} + OUTRIDER_SIM_BIN +
                       " --fleet 10 --ports 200 --discovery-dir " + dir.str() +
                       " --grpc-port " + std::to_string(free_port())}};
  CHECK(few.wait(10s).value_or(-1) == 1);
  CHECK(few.output().find("needs about 656 descriptors") != std::string::npos);
  child_process help{{OUTRIDER_SIM_BIN, "--fleet", "1", "--help"}};
  CHECK(help.wait(10s).value_or(-1) == 0);
  CHECK(help.output().find("--kv-batches-per-second") != std::string::npos);
}

TEST_CASE("mux fallback: in front of relays that do not serve RelayMux (a "
          "fleet run with --relay-mux false) each request goes as a Generate "
          "stream") {
  fleet_cluster c{4,
                  {"--shared-prefix-blocks", "8", "--relay-mux", "false"},
                  {"--dispatch", "mux"}};
  REQUIRE(eventually([&] { return c.metric("outrider_router_workers") == 4; },
                     allowed(30s)));
  for (uint32_t i = 0; i < 6; ++i) {
    auto out = complete_on(
      c.http_port, concat(system_prompt(32), tokens(9000 + 50 * i, 8)), 4);
    CHECK(out["choices"].size() == 1);
  }
  CHECK(c.metric("outrider_router_migrations_total") == 0);
  CHECK(c.router->output().find("does not serve RelayMux") !=
        std::string::npos);
}

TEST_CASE("the fleet's RelayMux: a router's default dispatch rides it, "
          "requests end as their sizes say, a cancel ends one at once") {
  // 20 ms a token: a request of 1,000 runs 20 s unless cancelled.
  fleet_cluster c{4, {"--shared-prefix-blocks", "8", "--token-ms", "20"}};
  REQUIRE(eventually([&] { return c.metric("outrider_router_workers") == 4; },
                     allowed(30s)));
  // Through the router (mux, the default): 8 at once, each its 6 tokens.
  std::vector<std::thread> clients;
  std::atomic<int> whole{0};
  for (uint32_t i = 0; i < 8; ++i)
    clients.emplace_back([&, i] {
      auto out = complete_on(
        c.http_port, concat(system_prompt(32), tokens(9000 + 50 * i, 8)), 6);
      if (out["choices"].size() == 1 &&
          out["usage"]["completion_tokens"] == 6 &&
          out["usage"]["prompt_tokens_details"]["cached_tokens"] == 32)
        ++whole;
    });
  for (auto& t : clients)
    t.join();
  CHECK(whole == 8);
  CHECK(c.router->output().find("does not serve RelayMux") ==
        std::string::npos);
  CHECK(c.metric("outrider_router_migrations_total") == 0);

  // A raw stream to one worker.
  auto endpoint = "127.0.0.1:" + std::to_string(c.fleet_port);
  raw_mux m{endpoint, "fleet-1"};
  CHECK(m.open(1, tokens(500, 8), 1000));
  CHECK(m.open(1, tokens(600, 8), 5)); // an id already open
  auto [before, refused] = m.until_done(1);
  CHECK(refused == static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
  CHECK(m.open(2, tokens(700, 8), 5));
  auto [five, ok] = m.until_done(2);
  CHECK(ok == 0);
  CHECK(five == std::vector<uint32_t>{1000, 1001, 1002, 1003, 1004});
  auto t0 = std::chrono::steady_clock::now();
  CHECK(m.cancel(1));
  auto [some, cancelled] = m.until_done(1);
  CHECK(cancelled == static_cast<int>(grpc::StatusCode::CANCELLED));
  CHECK(some.size() < 1000);
  CHECK(std::chrono::steady_clock::now() - t0 < allowed(5s));
  m.rw->WritesDone();
  CHECK(m.rw->Finish().ok());

  // A stream naming no worker of the fleet ends before any request.
  raw_mux stranger{endpoint, "worker-9"};
  stranger.open(1, tokens(100, 8), 4);
  mx::MuxResponse r;
  CHECK_FALSE(stranger.rw->Read(&r));
  CHECK(stranger.rw->Finish().error_code() ==
        grpc::StatusCode::FAILED_PRECONDITION);
}

TEST_CASE("a fleet on NATS: 100 workers' records in the bucket, their "
          "batches and heartbeats on the NATS event plane, a router follows") {
  nats_server n;
  fleet_cluster c{
    100,
    {"--nats-url", n.url(), "--shared-prefix-blocks", "8",
     "--kv-batches-per-second", "2", "--kv-blocks-per-batch", "4"},
    {"--discovery", "nats", "--nats-url", n.url(), "--event-plane", "nats"}};
  // Every record read from the bucket, every worker's snapshot taken, the
  // churn followed over NATS (the fleet's directory stays empty: no file
  // records).
  c.check_followed(100, 200);
  CHECK(std::filesystem::is_empty(c.discovery.path));
  // Positions follow on: in steady state heartbeats repeat the last one
  // and no batch is missed, so no worker is resynchronised (at start one
  // may be: batches published before the router's NATS subscription took
  // hold are what heartbeats are there to reveal). The fleet refreshes 100
  // leases every 3 s: the router's watcher reads the records again after a
  // pause (0.5 s or more), not on each refresh (a hundred listings in those
  // 6 s; at 10,000 workers a busy loop).
  auto resyncs = [&] {
    double n = 0;
    for (const char* why : {"gap", "heartbeat", "epoch"})
      n += c.metric(std::string{"outrider_router_kv_resyncs_total{reason=\""} +
                    why + "\"}");
    return n;
  };
  auto resynced = resyncs();
  auto listed = c.metric("outrider_discovery_listings_total");
  std::this_thread::sleep_for(6s); // the window measured, not a wait
  CHECK(c.metric("outrider_discovery_listings_total") - listed <= 30);
  CHECK(resyncs() == resynced);
  // Its batch went over NATS.
  c.check_routed_back();
  // Stopped, the fleet deletes its records from the bucket.
  c.fleet->signal(SIGTERM);
  REQUIRE(c.fleet->wait(30s).value_or(-1) == 0);
  CHECK(eventually([&] { return c.metric("outrider_router_workers") == 0; },
                   allowed(20s)));
}
