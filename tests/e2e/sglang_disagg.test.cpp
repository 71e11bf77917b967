// SGLang's disaggregation: a prefill engine holds a prompt's KV under a
// bootstrap room until the decode engine given the same room fetches it,
// so the router sends both legs at once (a random non-negative room).
// Proven against the simulator's handoff (proto/sim_bootstrap.proto),
// which, like SGLang, fails either leg sent alone.

#include <future>

#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "sglang.grpc.pb.h"
#include "sim/engine_core.hpp"
#include "tests/e2e/disagg_cluster.hpp"

using namespace outrider;
using namespace outrider::test;
namespace sg = sglang::runtime::v1;

namespace {

struct leg_result {
  std::vector<int32_t> ids;
  std::string finish;
  grpc::Status status;
};

leg_result run_leg(const sim_process& sim, const std::vector<uint32_t>& prompt,
                   int64_t room, int bootstrap_port, int max_tokens) {
  auto stub = sg::SglangService::NewStub(sim.channel());
  sg::GenerateRequest req;
  req.mutable_input_ids()->Add(prompt.begin(), prompt.end());
  req.mutable_sampling_params()->set_max_new_tokens(max_tokens);
  auto* p = req.mutable_disaggregated_params();
  p->set_bootstrap_host("127.0.0.1");
  p->set_bootstrap_port(bootstrap_port);
  p->set_bootstrap_room(room);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 20s);
  auto reader = stub->Generate(&ctx, req);
  leg_result r;
  sg::GenerateResponse resp;
  while (reader->Read(&resp)) {
    r.ids.insert(r.ids.end(), resp.output_ids().begin(),
                 resp.output_ids().end());
    auto f = resp.meta_info().find("finish_reason");
    if (f != resp.meta_info().end())
      r.finish = nlohmann::json::parse(f->second)["type"].get<std::string>();
  }
  r.status = reader->Finish();
  return r;
}

// A completion from another thread (no Catch2 assertions there): whether
// it answered 200 with `want`.
// On failure, `why` gets curl's output.
bool completes_with(uint16_t port, const std::vector<uint32_t>& prompt,
                    uint32_t max_tokens, const std::vector<uint32_t>& want,
                    std::string* why) {
  child_process curl{
    {"/usr/bin/curl", "-s", "-H", "Content-Type: application/json",
     "--data-binary",
     nlohmann::json{{"prompt", prompt}, {"max_tokens", max_tokens}}.dump(),
     "http://127.0.0.1:" + std::to_string(port) + "/v1/completions"}};
  *why = curl.output();
  if (curl.wait(60s) != 0)
    return false;
  *why = curl.output();
  auto doc = nlohmann::json::parse(*why, nullptr, false);
  return doc.is_object() && doc.contains("choices") &&
         doc["choices"][0]["token_ids"] == nlohmann::json(want);
}

std::vector<std::string> sglang_sim() {
  return {"--kv-hash-format", "int64", "--bootstrap-timeout", "1s"};
}

} // namespace

TEST_CASE("the simulator's SGLang bootstrap handoff: both legs at once "
          "succeed, either alone fails") {
  sim_process prefill{{.role = "prefill", .extra = sglang_sim()}};
  sim_process decode{{.role = "decode", .extra = sglang_sim()}};
  REQUIRE(prefill.wait_serving(10s));
  REQUIRE(decode.wait_serving(10s));
  auto prompt = tokens(300, 40);
  int port = std::stoi(prefill.endpoint().substr(10));

  // Together: the decode leg fetches the room and decodes the continuation.
  auto p = std::async(std::launch::async,
                      [&] { return run_leg(prefill, prompt, 77, port, 1); });
  auto d = run_leg(decode, prompt, 77, port, 5);
  auto pr = p.get();
  REQUIRE(d.status.ok());
  auto want = sim::continuation(prompt, 5);
  CHECK(std::vector<uint32_t>(d.ids.begin(), d.ids.end()) == want);
  REQUIRE(pr.status.ok());
  CHECK(pr.finish != "abort");
  CHECK(prefill.cache(0)["blocks"].size() == 10);

  // The prefill leg alone: nobody fetches, it ends aborted after the
  // bootstrap timeout.
  auto alone = run_leg(prefill, tokens(700, 8), 78, port, 1);
  REQUIRE(alone.status.ok());
  CHECK(alone.finish == "abort");
  // The decode leg alone (as a router that prefills first and decodes
  // after would send it): no prefill comes, the transfer fails.
  auto orphan = run_leg(decode, tokens(900, 8), 79, port, 3);
  CHECK(orphan.status.error_code() == grpc::StatusCode::UNAVAILABLE);
  CHECK(orphan.ids.empty());
}

TEST_CASE("disaggregation with SGLang engines: the router picks a bootstrap "
          "room and sends the prefill and decode legs together") {
  disagg_cluster c{R"({"policy":"isl_bounding","eff_isl_threshold":64,)"
                   R"("eff_isl_ratio_threshold":0.7})",
                   "100",
                   // 30 s: on a busy machine a 1 s handoff can time out.
                   {"--kv-hash-format", "int64", "--bootstrap-timeout", "30s"},
                   {"--engine-protocol", "sglang"}};
  // The prefill worker advertises its bootstrap server.
  auto record = [&](const char* id) {
    return nlohmann::json::parse(
      read_all(c.discovery.str() + "/" + id + ".json"));
  };
  auto p0 = record("p0");
  CHECK(p0["role"] == "prefill");
  CHECK(p0["bootstrap_endpoint"] == c.prefill.endpoint());
  CHECK(record("d0").count("bootstrap_endpoint") == 0);

  auto prompt = tokens(600, 200); // 50 blocks
  CHECK(c.complete(prompt, 6) == sim::continuation(prompt, 6));
  CHECK(c.metric(decisions + "{outcome=\"remote_prefill\"}") == 1);
  CHECK(c.prefill.cache(0)["blocks"].size() == 50);
  CHECK(c.decode.cache(0)["blocks"].size() >= 50); // fetched, stored
  // An SGLang decode engine cannot prefill itself: even with the prefix
  // cached where it decodes (isl_bounding would prefill locally), the
  // router sends a prefill leg with a room.
  REQUIRE(eventually(
    [&] { return c.metric("outrider_router_index_entries") >= 100; }, 10s));
  auto longer = concat(prompt, tokens(9000, 8));
  CHECK(c.complete(longer, 6) == sim::continuation(longer, 6));
  CHECK(c.metric(decisions + "{outcome=\"local_prefill\"}") == 0);
  CHECK(c.metric(decisions + "{outcome=\"remote_prefill\"}") == 2);

  // Several at once: each pair meets in its own room.
  std::vector<std::string> why(6);
  std::vector<std::future<bool>> many;
  for (uint32_t i = 0; i < 6; ++i)
    many.push_back(std::async(std::launch::async, [&c, &why, i] {
      auto p = tokens(20000 + 500 * i, 40);
      return completes_with(c.http_port, p, 4, sim::continuation(p, 4),
                            &why[i]);
    }));
  for (size_t i = 0; i < many.size(); ++i) {
    bool ok = many[i].get();
    INFO(why[i]);
    if (!ok)
      UNSCOPED_INFO(c.router->output());
    CHECK(ok);
  }
  CHECK(c.metric(decisions + "{outcome=\"remote_prefill\"}") == 8);
  CHECK(c.metric(decisions + "{outcome=\"prefill_failed\"}") == 0);
}
