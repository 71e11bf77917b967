// outrider-sim serves SGLang's native gRPC (sglang.runtime.v1) faithfully
// on its one port, beside vLLM's and OpenEngine's: what outrider's SGLang
// support is proven against. Streamed Generate (incremental, and
// cumulative with --sglang-cumulative-output), meta_info as JSON strings,
// the DP rank in the body, WatchEngineState snapshots on connect and on
// change (pause), server info with kv_events, abort by rid.

#include <csignal>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "grpc/health/v1/health.grpc.pb.h"
#include "sglang.grpc.pb.h"
#include "tests/e2e/router_cluster.hpp"

using namespace outrider::test;
namespace sg = sglang::runtime::v1;

namespace {

struct stream_result {
  std::vector<std::vector<int32_t>> messages;
  std::map<std::string, std::string> last_meta;
  grpc::Status status;
};

stream_result generate(sg::SglangService::Stub& stub,
                       const sg::GenerateRequest& req) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 20s);
  auto reader = stub.Generate(&ctx, req);
  stream_result r;
  sg::GenerateResponse resp;
  while (reader->Read(&resp)) {
    r.messages.emplace_back(resp.output_ids().begin(), resp.output_ids().end());
    for (const auto& [k, v] : resp.meta_info())
      r.last_meta[k] = v;
  }
  r.status = reader->Finish();
  return r;
}

sg::GenerateRequest request(int n, int rank = -1) {
  sg::GenerateRequest req;
  for (int i = 1; i <= 8; ++i)
    req.add_input_ids(i);
  req.mutable_sampling_params()->set_max_new_tokens(n);
  req.set_rid("rid-" + std::to_string(n));
  if (rank >= 0)
    req.set_routed_dp_rank(rank);
  return req;
}

} // namespace

TEST_CASE("the simulator speaks SGLang: Generate, meta_info, ranks, engine "
          "state, server info") {
  sim_process sim{{.ranks = 2}};
  REQUIRE(sim.wait_serving(10s));
  auto stub = sg::SglangService::NewStub(sim.channel());

  auto r = generate(*stub, request(6, 1));
  REQUIRE(r.status.ok());
  size_t total = 0;
  for (const auto& m : r.messages)
    total += m.size();
  CHECK(total == 6); // incremental: each message only the new ids
  CHECK(r.last_meta["prompt_tokens"] == "8");
  auto fin = nlohmann::json::parse(r.last_meta["finish_reason"]);
  CHECK(fin["type"] == "length");
  auto bad = request(2, 7); // no rank 7
  CHECK(generate(*stub, bad).status.error_code() ==
        grpc::StatusCode::INVALID_ARGUMENT);

  grpc::ClientContext info_ctx;
  sg::GetServerInfoResponse info;
  REQUIRE(stub->GetServerInfo(&info_ctx, {}, &info).ok());
  auto j = nlohmann::json::parse(info.json_info());
  CHECK(j["page_size"] == 4);
  CHECK(j["dp_size"] == 2);
  CHECK(j["kv_events"]["publisher"] == "zmq");
  CHECK(j["kv_events"]["endpoint_port_base"].is_number());

  // WatchEngineState: a snapshot on connect, another when paused.
  grpc::ClientContext watch_ctx;
  watch_ctx.set_deadline(std::chrono::system_clock::now() + 20s);
  auto watch = stub->WatchEngineState(&watch_ctx, {});
  sg::EngineStateSnapshot s1, s2;
  REQUIRE(watch->Read(&s1));
  CHECK(s1.healthy());
  CHECK_FALSE(s1.is_pause());
  CHECK(s1.instance_id() != 0);
  grpc::ClientContext pause_ctx;
  sg::PauseGenerationResponse paused;
  REQUIRE(stub->PauseGeneration(&pause_ctx, {}, &paused).ok());
  REQUIRE(watch->Read(&s2));
  CHECK(s2.is_pause());
  CHECK(s2.revision() > s1.revision());
  CHECK(s2.instance_id() == s1.instance_id());
  watch_ctx.TryCancel();
  grpc::ClientContext cont_ctx;
  sg::ContinueGenerationResponse cont;
  REQUIRE(stub->ContinueGeneration(&cont_ctx, {}, &cont).ok());
}

TEST_CASE("the simulator's SGLang output is cumulative when asked") {
  sim_process sim{{.extra = {"--sglang-cumulative-output"}}};
  REQUIRE(sim.wait_serving(10s));
  auto stub = sg::SglangService::NewStub(sim.channel());
  auto r = generate(*stub, request(5));
  REQUIRE(r.status.ok());
  REQUIRE(!r.messages.empty());
  CHECK(r.messages.back().size() == 5); // all so far, in the last message
  for (size_t i = 1; i < r.messages.size(); ++i)
    CHECK(r.messages[i].size() >= r.messages[i - 1].size());
}

TEST_CASE("SGLang behind a sidecar: the engine registered, its streams "
          "relayed, its KV events forwarded, and requests sent to the worker "
          "holding their prefix") {
  sim_process::options so;
  so.extra = {"--kv-hash-format", "int64"}; // SGLang's hashes
  cluster c{2, so, {}, {"--engine-protocol", "sglang"}};
  auto record = read_all(c.discovery.str() + "/worker-0.json");
  INFO(record);
  CHECK(record.find("\"sglang\"") != std::string::npos);
  check_prefix_routing(c);
  // A stream through the relay ends with the engine's finish and usage.
  auto r = c.complete(tokens(500, 12), 5);
  CHECK(r["choices"][0]["token_ids"].size() == 5);
  CHECK(r["choices"][0]["finish_reason"] == "length");
  CHECK(r["usage"]["prompt_tokens"] == 12);
}

TEST_CASE("an SGLang engine paused through its own RPC: the sidecar "
          "deregisters from WatchEngineState (standard health stays "
          "SERVING) and registers again on continue") {
  sim_process sim{{}};
  REQUIRE(sim.wait_serving(10s));
  sidecar_process side{
    sim.endpoint(), nullptr, {"--engine-protocol", "sglang"}};
  REQUIRE(eventually([&] { return side.get("/ready") == 200; }, 15s));
  auto stub = sg::SglangService::NewStub(sim.channel());
  {
    grpc::ClientContext ctx;
    sg::PauseGenerationResponse r;
    REQUIRE(stub->PauseGeneration(&ctx, {}, &r).ok());
  }
  // The engine's standard health still says SERVING, as SGLang's does.
  auto health = grpc::health::v1::Health::NewStub(sim.channel());
  grpc::ClientContext hctx;
  grpc::health::v1::HealthCheckRequest hreq;
  grpc::health::v1::HealthCheckResponse hresp;
  REQUIRE(health->Check(&hctx, hreq, &hresp).ok());
  CHECK(hresp.status() == grpc::health::v1::HealthCheckResponse::SERVING);
  CHECK(eventually([&] { return side.get("/ready") == 503; }, 10s));
  {
    grpc::ClientContext ctx;
    sg::ContinueGenerationResponse r;
    REQUIRE(stub->ContinueGeneration(&ctx, {}, &r).ok());
  }
  CHECK(eventually([&] { return side.get("/ready") == 200; }, 10s));
}

namespace {

size_t sidecar_blocks(const sidecar_process& side) {
  std::string body;
  if (side.get("/debug/index", &body) != 200)
    return 0;
  auto doc = nlohmann::json::parse(body, nullptr, false);
  if (!doc.is_object() || !doc["ranks"].contains("0"))
    return 0;
  return doc["ranks"]["0"]["blocks"].size();
}

std::string registered_instance(const sidecar_process& side) {
  auto recs = side.records();
  return recs.size() == 1 && side.get("/ready") == 200
           ? recs[0]["instance_id"].get<std::string>()
           : "";
}

} // namespace

TEST_CASE("an SGLang engine killed and replaced: deregistered, its index "
          "reset for the new instance, registered again") {
  sim_process sim{{.extra = {"--kv-hash-format", "int64"}}};
  REQUIRE(sim.wait_serving(10s));
  sidecar_process side{
    sim.endpoint(), nullptr, {"--engine-protocol", "sglang"}};
  REQUIRE(eventually([&] { return !registered_instance(side).empty(); }, 15s));
  auto first = registered_instance(side);
  warm(sim, tokens(100, 40));
  REQUIRE(eventually([&] { return sidecar_blocks(side) >= 10; }, 10s));

  sim.proc->signal(SIGKILL);
  REQUIRE(eventually([&] { return side.records().empty(); }, 5s));
  CHECK(side.get("/ready") == 503);
  sim.start(); // a new process: a new instance id
  REQUIRE(sim.wait_serving(10s));
  REQUIRE(eventually(
    [&] {
      auto now = registered_instance(side);
      return !now.empty() && now != first;
    },
    15s));
  CHECK(sidecar_blocks(side) == 0); // the old engine's blocks are gone
  warm(sim, tokens(900, 20));
  CHECK(eventually([&] { return sidecar_blocks(side) >= 5; }, 10s));
}

TEST_CASE("a mixed fleet (vLLM, SGLang and OpenEngine engines behind one "
          "router) routes by prefix across all three") {
  cluster c{0};
  const std::vector<std::string> protocols{"vllm", "sglang", "openengine"};
  std::vector<std::vector<uint32_t>> prefixes;
  for (size_t i = 0; i < protocols.size(); ++i) {
    sim_process::options so;
    if (protocols[i] == "sglang")
      so.extra = {"--kv-hash-format", "int64"};
    c.sims.push_back(std::make_unique<sim_process>(so));
    REQUIRE(c.sims.back()->wait_serving(10s));
    c.sides.push_back(std::make_unique<sidecar_process>(
      c.sims.back()->endpoint(), std::make_shared<sidecar_dirs>(),
      std::vector<std::string>{"--discovery-dir", c.discovery.str(),
                               "--worker-id", "worker-" + std::to_string(i),
                               "--engine-protocol", protocols[i]}));
    prefixes.push_back(tokens(3000 + 1000 * static_cast<uint32_t>(i), 64));
  }
  REQUIRE(eventually(
    [&] { return c.router_metric("outrider_router_workers") == 3; }, 20s));
  for (size_t i = 0; i < protocols.size(); ++i)
    warm(*c.sims[i], prefixes[i]);
  REQUIRE(eventually(
    [&] { return c.router_metric("outrider_router_index_entries") >= 48; },
    10s));
  // Prefix i's 4 requests ask for i + 1 tokens each and must all go
  // through the relay of worker i, the one holding it (vLLM reports no
  // cached tokens: the relays' token counts tell where requests went).
  for (uint32_t round = 0; round < 4; ++round)
    for (size_t i = 0; i < protocols.size(); ++i) {
      auto n = static_cast<uint32_t>(i + 1);
      auto r =
        c.complete(concat(prefixes[i], tokens(20000 + 50 * round, 6)), n);
      CHECK(r["choices"][0]["token_ids"].size() == n);
    }
  for (size_t i = 0; i < protocols.size(); ++i) {
    INFO(protocols[i]);
    CHECK(c.sides[i]->metric("outrider_relay_tokens_total").value_or(0) ==
          4.0 * static_cast<double>(i + 1));
  }
}

TEST_CASE("an SGLang sidecar started before its engine registers once it "
          "serves, and on SIGTERM withdraws its record and leaves the "
          "engine serving") {
  sim_process sim{{.start_now = false}};
  sidecar_process side{
    sim.endpoint(), nullptr, {"--engine-protocol", "sglang"}};
  REQUIRE(eventually([&] { return side.get("/live") == 200; }, 10s));
  CHECK(side.get("/ready") == 503);
  CHECK(side.records().empty());
  sim.start();
  REQUIRE(sim.wait_serving(10s));
  REQUIRE(eventually([&] { return !registered_instance(side).empty(); }, 15s));
  auto rec = side.records()[0];
  CHECK(rec["kv_block_size"] == 4);
  warm(sim, tokens(100, 16));
  CHECK(eventually([&] { return sidecar_blocks(side) >= 4; }, 10s));

  side.proc->signal(SIGTERM);
  auto code = side.proc->wait(15s);
  REQUIRE(code);
  CHECK(*code == 0);
  CHECK(side.records().empty());
  CHECK(sim.wait_serving(1s)); // the engine keeps serving
}
