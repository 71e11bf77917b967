// The sidecar's behaviour table with SGLang engines, against the
// simulator serving only SGLang's services (--protocol sglang, as a real
// SGLang engine offers): the protocol found by `--engine-protocol auto`,
// a sidecar killed and recovered (SGLang advertises no replay endpoint:
// the store is what survives), history lost while it was down, garbage on
// the KV stream.

#include <csignal>
#include <set>

#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "openengine.grpc.pb.h"
#include "sglang.grpc.pb.h"
#include "tests/e2e/router_cluster.hpp"

using namespace outrider::test;
namespace sg = sglang::runtime::v1;

namespace {

sim_process::options sglang_engine() {
  sim_process::options so;
  so.extra = {"--protocol", "sglang", "--kv-hash-format", "int64"};
  so.num_blocks = 4096;
  return so;
}

// One request to its end on SGLang's Generate; true when it succeeded.
bool sg_generate(const sim_process& sim, uint32_t first, size_t n) {
  auto stub = sg::SglangService::NewStub(sim.channel());
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 20s);
  sg::GenerateRequest req;
  for (size_t i = 0; i < n; ++i)
    req.add_input_ids(static_cast<int32_t>(first + i));
  req.mutable_sampling_params()->set_max_new_tokens(2);
  auto reader = stub->Generate(&ctx, req);
  sg::GenerateResponse resp;
  bool finished = false;
  while (reader->Read(&resp))
    finished |= resp.finished();
  auto st = reader->Finish();
  if (!st.ok() || !finished)
    UNSCOPED_INFO("SGLang Generate: " << st.error_code() << " "
                                      << st.error_message() << ", finished "
                                      << finished);
  return st.ok() && finished;
}

using block_set = std::set<std::pair<uint64_t, std::vector<uint32_t>>>;

block_set blocks_of(const nlohmann::json& list) {
  block_set out;
  for (const auto& b : list)
    out.insert(
      {b["hash"].get<uint64_t>(), b["token_ids"].get<std::vector<uint32_t>>()});
  return out;
}

block_set index_blocks(const sidecar_process& side) {
  std::string body;
  if (side.get("/debug/index", &body) != 200)
    return {};
  auto doc = nlohmann::json::parse(body, nullptr, false);
  if (!doc.is_object() || !doc["ranks"].contains("0"))
    return {};
  return blocks_of(doc["ranks"]["0"]["blocks"]);
}

block_set truth_blocks(const sim_process& sim) {
  auto doc = sim.cache(0);
  return doc.is_object() ? blocks_of(doc["blocks"]) : block_set{};
}

bool index_matches(const sidecar_process& side, const sim_process& sim) {
  auto truth = truth_blocks(sim);
  return !truth.empty() && index_blocks(side) == truth;
}

bool registered(const sidecar_process& side) {
  return side.records().size() == 1 && side.get("/ready") == 200;
}

void pause_generation(const sim_process& sim, bool pause) {
  auto stub = sg::SglangService::NewStub(sim.channel());
  grpc::ClientContext ctx;
  if (pause) {
    sg::PauseGenerationResponse r;
    REQUIRE(stub->PauseGeneration(&ctx, {}, &r).ok());
  } else {
    sg::ContinueGenerationResponse r;
    REQUIRE(stub->ContinueGeneration(&ctx, {}, &r).ok());
  }
}

} // namespace

TEST_CASE("engine protocol auto finds an SGLang engine by its services and "
          "follows its engine state") {
  sim_process sim{sglang_engine()};
  REQUIRE(sim.wait_serving(10s));
  sidecar_process side{sim.endpoint()}; // auto, the default
  REQUIRE(eventually([&] { return registered(side); }, 15s));
  CHECK(side.records()[0]["protocol"] == "sglang");
  REQUIRE(sg_generate(sim, 10, 20));
  CHECK(eventually([&] { return index_matches(side, sim); }, 10s));
  // Pause is seen on WatchEngineState (standard health stays SERVING).
  pause_generation(sim, true);
  CHECK(eventually([&] { return side.records().empty(); }, 10s));
  CHECK(sim.wait_serving(1s));
  pause_generation(sim, false);
  CHECK(eventually([&] { return registered(side); }, 10s));
  // The relay speaks SGLang to it.
  auto stub = openengine::v1::Inference::NewStub(grpc::CreateChannel(
    side.relay_endpoint(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 20s);
  openengine::v1::GenerateRequest req;
  for (uint32_t t : {5u, 6u, 7u})
    req.mutable_token_ids()->add_ids(t);
  req.mutable_stopping()->set_max_tokens(4);
  auto reader = stub->Generate(&ctx, req);
  openengine::v1::GenerateResponse resp;
  size_t got = 0;
  while (reader->Read(&resp))
    got += static_cast<size_t>(resp.token().tokens_size());
  CHECK(reader->Finish().ok());
  CHECK(got == 4);
}

TEST_CASE("engine protocol auto finds a vLLM-only engine") {
  auto so = sglang_engine();
  so.extra = {"--protocol", "vllm"};
  sim_process sim{so};
  REQUIRE(sim.wait_serving(10s));
  sidecar_process side{sim.endpoint()};
  REQUIRE(eventually([&] { return registered(side); }, 15s));
  CHECK(side.records()[0]["protocol"] == "vllm");
}

TEST_CASE("an SGLang sidecar killed and recovered keeps its index from its "
          "store, and history lost while it was down resets the rank") {
  sim_process sim{sglang_engine()};
  REQUIRE(sim.wait_serving(10s));
  auto dirs = std::make_shared<sidecar_dirs>();
  std::vector<std::string> flags{"--engine-protocol", "sglang"};
  auto side = std::make_unique<sidecar_process>(sim.endpoint(), dirs, flags);
  REQUIRE(eventually([&] { return registered(*side); }, 15s));
  for (uint32_t i = 0; i < 4; ++i)
    REQUIRE(sg_generate(sim, 100 + 50 * i, 16));
  REQUIRE(eventually([&] { return index_matches(*side, sim); }, 10s));
  auto before = index_blocks(*side);

  // Killed with nothing happening meanwhile: the store has it all.
  side->proc->signal(SIGKILL);
  REQUIRE(side->proc->wait(5s));
  side = std::make_unique<sidecar_process>(sim.endpoint(), dirs, flags);
  REQUIRE(eventually([&] { return registered(*side); }, 15s));
  CHECK(index_blocks(*side) == before);
  CHECK(side->metric("outrider_kv_gaps_unrecoverable_total{rank=\"0\"}")
          .value_or(0) == 0);

  // Killed while the engine works on: what happened meanwhile cannot be
  // replayed, the gap is seen, the rank starts over from the live stream.
  side->proc->signal(SIGKILL);
  REQUIRE(side->proc->wait(5s));
  for (uint32_t i = 0; i < 4; ++i)
    REQUIRE(sg_generate(sim, 5000 + 50 * i, 16));
  side = std::make_unique<sidecar_process>(sim.endpoint(), dirs, flags);
  REQUIRE(eventually([&] { return registered(*side); }, 15s));
  REQUIRE(sg_generate(sim, 9000, 16)); // the next live batch shows the gap
  CHECK(eventually(
    [&] {
      return side->metric("outrider_kv_gaps_unrecoverable_total{rank=\"0\"}")
               .value_or(0) >= 1.0;
    },
    10s));
  // Consistent: everything indexed is in the engine, and new events apply.
  CHECK(eventually(
    [&] {
      auto idx = index_blocks(*side);
      auto truth = truth_blocks(sim);
      if (idx.empty())
        return false;
      for (const auto& b : idx)
        if (!truth.count(b))
          return false;
      return true;
    },
    10s));
  CHECK(registered(*side));
}

TEST_CASE("garbage on an SGLang engine's KV stream is counted and does no "
          "harm") {
  sim_process sim{sglang_engine()};
  REQUIRE(sim.wait_serving(10s));
  sidecar_process side{
    sim.endpoint(), nullptr, {"--engine-protocol", "sglang"}};
  REQUIRE(eventually([&] { return registered(side); }, 15s));
  REQUIRE(sg_generate(sim, 10, 12));
  REQUIRE(eventually([&] { return index_matches(side, sim); }, 10s));
  auto inject = [&](const nlohmann::json& body) {
    return sim.post_debug("/debug/kv_inject", body.dump());
  };
  REQUIRE(inject({{"frames_hex", {"6b762d6576656e7473", "0001"}}}));
  REQUIRE(inject({{"payload_hex", "c1"}}));
  REQUIRE(inject({{"payload_hex", "93cb41d954fc40400000"
                                  "91"
                                  "91aa426c6f636b4d6f766564"
                                  "00"}}));
  REQUIRE(sg_generate(sim, 500, 12));
  CHECK(eventually([&] { return index_matches(side, sim); }, 10s));
  auto rejected = [&](const std::string& reason) {
    return side
      .metric("outrider_kv_events_rejected_total{reason=\"" + reason +
              "\",rank=\"0\"}")
      .value_or(0);
  };
  CHECK(eventually([&] { return rejected("malformed_frame") >= 1; }, 5s));
  CHECK(rejected("malformed_msgpack") >= 1);
  CHECK(rejected("unknown_event_type") >= 1);
  CHECK(registered(side));
}
