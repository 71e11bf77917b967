// `outrider-sim --fleet N` (sim/fleet/): many workers in one process, each
// with its own record, cache and KV stream, as a router meets a fleet.

#include "tests/e2e/router_cluster.hpp"

using namespace outrider::test;
using json = nlohmann::json;

namespace {
struct fleet_cluster {
  temp_dir discovery;
  uint16_t fleet_port = free_port();
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
};

// The first `n` of a prompt: the fleet's system prompt is tokens 1, 2, ...
std::vector<uint32_t> system_prompt(size_t n) {
  return tokens(1, n);
}

} // namespace

TEST_CASE("a fleet of 200 simulated workers: the router knows each, follows "
          "their KV churn, and places by their caches") {
  fleet_cluster c{200,
                  {"--shared-prefix-blocks", "8", "--kv-batches-per-second",
                   "2", "--kv-blocks-per-batch", "4"}};
  // Every worker announced: each one's stream answered with its snapshot.
  CHECK(eventually([&] { return c.metric("outrider_router_workers") == 200; },
                   allowed(30s)));
  // The shared prefix (8 blocks) of each, plus the churn.
  CHECK(eventually(
    [&] { return c.metric("outrider_router_index_entries") >= 200 * 8; },
    allowed(20s)));
  // Churn batches keep coming, stamped by the fleet: the router measures
  // their lag.
  auto lagged = c.metric("outrider_router_kv_event_lag_seconds_count");
  CHECK(eventually(
    [&] {
      return c.metric("outrider_router_kv_event_lag_seconds_count") >=
             lagged + 100;
    },
    allowed(20s)));
  // A prompt after the system prompt finds it cached wherever it goes.
  auto out =
    complete_on(c.http_port, concat(system_prompt(32), tokens(9000, 8)), 4);
  REQUIRE(out["choices"].size() == 1);
  CHECK(out["usage"]["prompt_tokens_details"]["cached_tokens"] == 32);
  // A prompt of its own: cached on one worker, then routed back there.
  auto own = concat(system_prompt(32), tokens(20000, 64));
  REQUIRE(complete_on(c.http_port, own, 2)["choices"].size() == 1);
  bool back = eventually(
    [&] {
      auto again = complete_on(c.http_port, own, 2);
      return again["usage"]["prompt_tokens_details"]["cached_tokens"]
               .get<int>() >= 92;
    },
    allowed(10s));
  CHECK(back);
  // Each decision timed.
  CHECK(c.metric("outrider_router_decision_seconds_count") >= 2);
  // Stopped, the fleet withdraws its records.
  c.fleet->signal(SIGTERM);
  REQUIRE(c.fleet->wait(20s).value_or(-1) == 0);
  CHECK(std::filesystem::is_empty(c.discovery.path));
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
  child_process help{{OUTRIDER_SIM_BIN, "--fleet", "1", "--help"}};
  CHECK(help.wait(10s).value_or(-1) == 0);
  CHECK(help.output().find("--kv-batches-per-second") != std::string::npos);
}

TEST_CASE("mux fallback: in front of relays that do not serve RelayMux (the "
          "fleet simulator's) each request goes as a Generate stream") {
  fleet_cluster c{4, {"--shared-prefix-blocks", "8"}, {"--dispatch", "mux"}};
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
