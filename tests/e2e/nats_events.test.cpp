// `--event-plane nats` against a real nats-server: sidecars publish their
// KV batches once, every router follows them on a wildcard subject, and a
// router resynchronises a worker from its sidecar's snapshot when the
// positions skip. Routers fed the same stream hold the same index, and
// that index is the engines' true cache.

#include <atomic>
#include <csignal>
#include <thread>

#include "cluster/kv/kv_proto.hpp"
#include "cluster/nats_kv_plane.hpp"
#include "openengine.pb.h"
#include "tests/e2e/nats_server.hpp"
#include "tests/e2e/router_cluster.hpp"

namespace oc = outrider::cluster;
namespace kv = outrider::kv;
using namespace outrider::test;
using json = nlohmann::json;

namespace {

// The router's index: worker -> rank -> sorted engine block hashes.
json router_index(uint16_t status) {
  std::string body;
  if (http_get(status, "/debug/index", &body) != 200)
    return {};
  return json::parse(body, nullptr, false)["workers"];
}

// Rank 0 of every worker in the router's index equals its engine's cache
// (and at least one cache is not empty).
bool matches_engines(const json& index, const cluster& c) {
  size_t held = 0;
  for (size_t i = 0; i < c.sims.size(); ++i) {
    std::vector<uint64_t> truth;
    auto cache = c.sims[i]->cache(0);
    for (const auto& b : cache["blocks"])
      truth.push_back(b["hash"].get<uint64_t>());
    std::sort(truth.begin(), truth.end());
    held += truth.size();
    auto id = "worker-" + std::to_string(i);
    if (!index.is_object() || !index.contains(id) || !index[id].contains("0") ||
        index[id]["0"].get<std::vector<uint64_t>>() != truth)
      return false;
  }
  return held > 0;
}

std::string gap_series() {
  return R"(outrider_router_kv_resyncs_total{reason="gap"})";
}

} // namespace

TEST_CASE("nats event plane: routing by prefix, two routers in step, a late "
          "router catches up, an injected gap resynchronises") {
  nats_server nats;
  auto flags = fleet_flags(nats);
  cluster c{2, {}, flags, flags};
  REQUIRE(eventually(
    [&] { return c.router_metric("outrider_router_workers") == 2; }, 15s));

  // The routing test of the file backend, over NATS.
  check_prefix_routing(c);
  REQUIRE(eventually(
    [&] { return matches_engines(router_index(c.router_status), c); }, 10s));
  // Nothing was read from the sidecars but one snapshot per worker.
  CHECK(c.router_metric(
          R"(outrider_router_kv_resyncs_total{reason="start"})") == 2);

  // A router that starts late catches up from the snapshots, then follows.
  extra_router late{flags};
  REQUIRE(eventually(
    [&] { return router_index(late.status) == router_index(c.router_status); },
    10s));
  for (uint32_t i = 0; i < 6; ++i)
    c.complete(tokens(24000 + 1000 * i, 40), 2);
  REQUIRE(eventually(
    [&] {
      auto a = router_index(c.router_status);
      return matches_engines(a, c) && router_index(late.status) == a;
    },
    10s));

  // A batch whose position skips ahead, with a block no engine holds: both
  // routers see the gap, resynchronise, and the bogus block is not kept.
  oc::nats_config nc;
  nc.urls = {nats.url()};
  oc::nats_kv_plane probe{nc};
  REQUIRE(!probe.open());
  std::mutex mtx;
  std::optional<oc::kv_plane_message> beat;
  REQUIRE(!probe.subscribe([&](oc::kv_plane_message m) {
    std::lock_guard<std::mutex> guard{mtx};
    if (m.worker_id == "worker-0" && m.heartbeat)
      beat = m;
  }));
  REQUIRE(eventually(
    [&] {
      std::lock_guard<std::mutex> guard{mtx};
      return beat.has_value();
    },
    5s));
  auto bogus = *beat;
  bogus.heartbeat = false;
  bogus.position += 5;
  openengine::v1::KvEventBatch batch;
  auto* stored = batch.add_events()->mutable_block_stored();
  *stored->add_block_hashes() = kv::to_proto_hash(0xdeadbeefULL);
  for (uint32_t t = 0; t < 4; ++t)
    stored->add_token_ids(t);
  stored->set_block_size(4);
  batch.SerializeToString(&bogus.batch);
  REQUIRE(probe.publish(bogus));
  REQUIRE(eventually(
    [&] {
      return c.router_metric(gap_series()) >= 1 &&
             metric_value(late.status, gap_series()) >= 1;
    },
    10s));
  REQUIRE(eventually(
    [&] {
      auto a = router_index(c.router_status);
      return matches_engines(a, c) && router_index(late.status) == a;
    },
    10s));
  CHECK(
    router_index(c.router_status).dump().find(std::to_string(0xdeadbeefULL)) ==
    std::string::npos);
}

TEST_CASE("nats event plane: a NATS restart in the middle of a run fails no "
          "request and the index converges on the engines' caches") {
  nats_server nats;
  auto flags = fleet_flags(nats);
  cluster c{2, {}, flags, flags};
  REQUIRE(eventually(
    [&] { return c.router_metric("outrider_router_workers") == 2; }, 15s));
  std::atomic<bool> stop{false};
  std::atomic<int> sent{0}, failed{0};
  std::thread load([&] {
    for (uint32_t i = 0; !stop && i < 2000; ++i) {
      auto [code, body] = http(
        c.http_port, "POST", "/v1/completions",
        json{{"prompt", tokens(4000 + (24 * i) % 24000, 24)}, {"max_tokens", 2}}
          .dump());
      ++sent;
      if (code != 200)
        ++failed;
    }
  });
  REQUIRE(eventually([&] { return sent >= 10; }, 20s));
  nats.proc->signal(SIGKILL);
  REQUIRE(nats.proc->wait(5s));
  auto before = sent.load();
  REQUIRE(eventually([&] { return sent >= before + 10; }, 20s));
  nats.start();
  REQUIRE(eventually(
    [&] {
      return c.router_metric(
               R"(outrider_router_kv_resyncs_total{reason="reconnect"})") >= 2;
    },
    20s));
  before = sent.load();
  REQUIRE(eventually([&] { return sent >= before + 10; }, 20s));
  stop = true;
  load.join();
  CHECK(failed == 0);
  CHECK(eventually(
    [&] { return matches_engines(router_index(c.router_status), c); }, 15s));
}
