// End-to-end tests of the sidecar's relay and event plane: a real router-side
// OpenEngine client against the sidecar, the sidecar against outrider-sim.
#include <csignal>
#include <thread>

#include <catch2/catch.hpp>

#include "cluster/kv/kv_proto.hpp"
#include "openengine.grpc.pb.h"
#include "sim/engine_core.hpp"
#include "tests/e2e/sidecar_process.hpp"
#include "tests/e2e/sim_process.hpp"

using namespace outrider;
using namespace outrider::test;
using namespace std::chrono_literals;
namespace oe = openengine::v1;

namespace {

std::shared_ptr<grpc::Channel> channel_to(const std::string& endpoint) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS,
              50); // not MIN: sim_process
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 250);
  return grpc::CreateCustomChannel(endpoint, grpc::InsecureChannelCredentials(),
                                   args);
}

oe::GenerateRequest request(const std::vector<uint32_t>& prompt,
                            uint32_t max_tokens, std::string id = {}) {
  oe::GenerateRequest req;
  req.set_request_id(std::move(id));
  req.mutable_token_ids()->mutable_ids()->Add(prompt.begin(), prompt.end());
  req.mutable_stopping()->set_max_tokens(max_tokens);
  return req;
}

int running(const sim_process& sim) {
  std::string body;
  if (http_get(sim.debug, "/debug/load?rank=0", &body) != 200)
    return -1;
  return nlohmann::json::parse(body)["running"].get<int>();
}

bool ready(const sidecar_process& side) {
  return side.get("/ready") == 200;
}

} // namespace

TEST_CASE("a relayed stream equals the engine's tokens, for both protocols") {
  auto protocol = GENERATE(std::string{"vllm"}, std::string{"openengine"});
  sim_process sim{{}};
  REQUIRE(sim.wait_serving(10s));
  sidecar_process side{
    sim.endpoint(), nullptr, {"--engine-protocol", protocol}};
  REQUIRE(eventually([&] { return ready(side); }, 10s));
  auto stub = oe::Inference::NewStub(channel_to(side.relay_endpoint()));
  std::vector<uint32_t> prompt;
  for (uint32_t i = 0; i < 45; ++i)
    prompt.push_back(100 + i);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 20s);
  ctx.AddMetadata("openengine-target-dp-rank", "0");
  auto reader = stub->Generate(&ctx, request(prompt, 30));
  oe::GenerateResponse resp;
  std::vector<uint32_t> tokens;
  bool prompt_seen = false;
  bool finished = false;
  while (reader->Read(&resp)) {
    prompt_seen |= resp.has_prompt();
    if (resp.has_token())
      for (const auto& t : resp.token().tokens())
        tokens.push_back(t.token_id());
    if (resp.has_finished()) {
      finished = true;
      CHECK(resp.finished().reason() == oe::FINISH_REASON_LENGTH);
      CHECK(resp.usage().completion_tokens() == 30);
      CHECK(resp.usage().prompt_tokens() == 45);
    }
  }
  auto st = reader->Finish();
  INFO(st.error_message());
  REQUIRE(st.ok());
  CHECK(prompt_seen);
  CHECK(finished);
  CHECK(tokens == sim::continuation(prompt, 30));
  CHECK(side.metric("outrider_relay_tokens_total") == 30.0);

  // Engine errors come back with the engine's status code.
  grpc::ClientContext bad;
  bad.set_deadline(std::chrono::system_clock::now() + 20s);
  auto r2 = stub->Generate(&bad, request({}, 3));
  while (r2->Read(&resp)) {
  }
  CHECK(r2->Finish().error_code() == grpc::StatusCode::INVALID_ARGUMENT);

  // Control calls reach the engine through the sidecar.
  auto control = oe::Control::NewStub(channel_to(side.relay_endpoint()));
  grpc::ClientContext ictx;
  oe::GetServerInfoRequest ireq;
  oe::ServerInfo info;
  REQUIRE(control->GetServerInfo(&ictx, ireq, &info).ok());
  CHECK(info.instance_id() == sim.cache(0)["instance_id"].get<std::string>());
  CHECK(info.capacity().kv_block_size() == 4);
}

TEST_CASE("the relay passes a priority on: in the body to vLLM engines, as "
          "metadata to OpenEngine ones") {
  auto protocol = GENERATE(std::string{"vllm"}, std::string{"openengine"});
  auto policy = GENERATE(std::string{"fcfs"}, std::string{"priority"});
  sim_process::options o;
  o.extra = {"--scheduling-policy", policy};
  sim_process sim{o};
  REQUIRE(sim.wait_serving(10s));
  sidecar_process side{
    sim.endpoint(), nullptr, {"--engine-protocol", protocol}};
  REQUIRE(eventually([&] { return ready(side); }, 10s));
  auto stub = oe::Inference::NewStub(channel_to(side.relay_endpoint()));
  auto call = [&](const char* priority) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 20s);
    if (priority)
      ctx.AddMetadata("openengine-priority", priority);
    auto reader = stub->Generate(&ctx, request({7, 8, 9, 10, 11}, 2));
    oe::GenerateResponse resp;
    while (reader->Read(&resp)) {
    }
    return reader->Finish();
  };
  CHECK(call(nullptr).ok());
  auto st = call("-1");
  INFO(protocol << " " << policy << ": " << st.error_message());
  // vLLM refuses a priority it cannot schedule by, as the real one does:
  // the refusal shows the priority reached the engine. OpenEngine takes it
  // as a hint.
  if (protocol == "vllm" && policy == "fcfs")
    CHECK(st.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  else
    CHECK(st.ok());
  // A malformed one is refused, by the engine (OpenEngine) or the relay.
  CHECK(call("high").error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(call("99999999999").error_code() == grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_CASE("the relay refuses a malformed or repeated DP rank instead of "
          "reading it as rank 0") {
  sim_process sim{{}};
  REQUIRE(sim.wait_serving(10s));
  sidecar_process side{sim.endpoint()};
  REQUIRE(eventually([&] { return ready(side); }, 10s));
  auto stub = oe::Inference::NewStub(channel_to(side.relay_endpoint()));
  auto call = [&](std::vector<std::string> ranks) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 20s);
    for (const auto& r : ranks)
      ctx.AddMetadata("openengine-target-dp-rank", r);
    auto reader = stub->Generate(&ctx, request({7, 8, 9, 10, 11}, 2));
    oe::GenerateResponse resp;
    while (reader->Read(&resp)) {
    }
    return reader->Finish();
  };
  CHECK(call({"0"}).ok());
  for (const char* bad : {"zero", "0x1", "-1", "1.5", "99999999999"}) {
    auto st = call({bad});
    INFO(bad << ": " << st.error_message());
    CHECK(st.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  }
  CHECK(call({"0", "0"}).error_code() == grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_CASE("cancelling a relayed stream aborts the request on the engine") {
  auto protocol = GENERATE(std::string{"vllm"}, std::string{"openengine"},
                           std::string{"sglang"});
  sim_process sim{{.extra = {"--speedup", "1"}}};
  REQUIRE(sim.wait_serving(10s));
  sidecar_process side{
    sim.endpoint(), nullptr, {"--engine-protocol", protocol}};
  REQUIRE(eventually([&] { return ready(side); }, 10s));
  auto stub = oe::Inference::NewStub(channel_to(side.relay_endpoint()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 30s);
  auto reader = stub->Generate(&ctx, request({5, 6, 7}, 800, "to-cancel"));
  oe::GenerateResponse resp;
  bool got_token = false;
  for (int i = 0; i < 10 && !got_token && reader->Read(&resp); ++i)
    got_token = resp.has_token();
  REQUIRE(got_token);
  CHECK(running(sim) == 1);
  ctx.TryCancel();
  reader->Finish();
  INFO(side.proc->output());
  CHECK(eventually([&] { return running(sim) == 0; }, 3s));
  CHECK(eventually(
    [&] {
      return side.metric(
               "outrider_relay_requests_total{outcome=\"cancelled\"}") == 1.0;
    },
    3s));
}

TEST_CASE("an engine dying mid-stream ends the relayed stream as migratable") {
  // Each engine kind alone on its port, found by --engine-protocol auto.
  auto protocol = GENERATE(std::string{"vllm"}, std::string{"openengine"},
                           std::string{"sglang"});
  INFO(protocol);
  sim_process sim{{.extra = {"--speedup", "1", "--protocol", protocol}}};
  REQUIRE(sim.wait_serving(10s));
  sidecar_process side{sim.endpoint()};
  REQUIRE(eventually([&] { return ready(side); }, 10s));
  auto stub = oe::Inference::NewStub(channel_to(side.relay_endpoint()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 30s);
  auto reader = stub->Generate(&ctx, request({5, 6, 7}, 800));
  oe::GenerateResponse resp;
  int tokens = 0;
  while (tokens < 3 && reader->Read(&resp))
    tokens += resp.has_token() ? 1 : 0;
  REQUIRE(tokens == 3);
  sim.proc->signal(SIGKILL);
  while (reader->Read(&resp)) {
  }
  auto st = reader->Finish();
  CHECK(st.error_code() == grpc::StatusCode::UNAVAILABLE);
  CHECK_THAT(st.error_message(),
             Catch::Matchers::Contains("engine stream broke"));
}

TEST_CASE("SubscribeKvEvents serves the sidecar's index, live and resumed") {
  sim_process sim{{}};
  REQUIRE(sim.wait_serving(10s));
  sidecar_process side{sim.endpoint()};
  REQUIRE(eventually([&] { return ready(side); }, 10s));
  auto engine = oe::Inference::NewStub(sim.channel());
  auto run = [&](uint32_t first, uint32_t n) {
    std::vector<uint32_t> p;
    for (uint32_t i = 0; i < n; ++i)
      p.push_back(first + i);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 20s);
    auto r = engine->Generate(&ctx, request(p, 1));
    oe::GenerateResponse resp;
    while (r->Read(&resp)) {
    }
    return r->Finish().ok();
  };
  REQUIRE(run(10, 17)); // 4 blocks
  auto control = oe::Control::NewStub(channel_to(side.relay_endpoint()));
  auto blocks_in_index = [&] {
    std::string body;
    side.get("/debug/index", &body);
    auto doc = nlohmann::json::parse(body, nullptr, false);
    return doc.is_object() && doc["ranks"].contains("0")
             ? doc["ranks"]["0"]["blocks"].size()
             : size_t{0};
  };
  REQUIRE(eventually([&] { return blocks_in_index() == 4; }, 5s));

  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 20s);
  oe::SubscribeKvEventsRequest req;
  req.set_include_snapshot(true);
  auto reader = control->SubscribeKvEvents(&ctx, req);
  oe::SubscribeKvEventsResponse resp;
  REQUIRE(reader->Read(&resp));
  REQUIRE(resp.has_batch());
  CHECK(resp.batch().events_size() == 4);
  auto snapshot_seq = resp.batch().sequence_number();
  for (const auto& ev : resp.batch().events())
    CHECK(kv::from_proto(ev).has_value());
  REQUIRE(run(900, 9)); // 2 more blocks, live
  REQUIRE(reader->Read(&resp));
  REQUIRE(resp.has_batch());
  CHECK(resp.batch().sequence_number() > snapshot_seq);
  auto live_seq = resp.batch().sequence_number();
  auto ev = kv::from_proto(resp.batch().events(0));
  REQUIRE(ev);
  CHECK(std::get<kv::block_stored>(*ev).block_hashes.size() == 2);
  ctx.TryCancel();
  reader->Finish();

  // A subscriber that knows where it stopped resumes without a snapshot.
  grpc::ClientContext rctx;
  rctx.set_deadline(std::chrono::system_clock::now() + 20s);
  oe::SubscribeKvEventsRequest resume;
  resume.set_start_sequence_number(live_seq);
  auto again = control->SubscribeKvEvents(&rctx, resume);
  REQUIRE(again->Read(&resp));
  REQUIRE(resp.has_batch());
  CHECK(resp.batch().sequence_number() == live_seq);
  rctx.TryCancel();
  again->Finish();
}
