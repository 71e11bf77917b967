// The engines' own KV load (OpenEngine GetLoad, asked through each relay
// once a second) feeds the decode-busy guard of conditional
// disaggregation: a decode engine kept busy by traffic the router never
// saw vetoes local prefill, which the router's books alone would allow.
#include <thread>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "sim/engine_core.hpp"
#include "tests/e2e/disagg_cluster.hpp"
#include "vllm.grpc.pb.h"

using namespace outrider;
using namespace outrider::test;
using namespace std::chrono_literals;

namespace {

// The decode worker's rank 0 as the router's status reports it.
nlohmann::json decode_rank(const disagg_cluster& c) {
  std::string body;
  if (http_get(c.status, "/debug/status", &body) != 200)
    return {};
  auto doc = nlohmann::json::parse(body, nullptr, false);
  if (!doc.is_object())
    return {};
  for (const auto& w : doc["workers"])
    if (w["id"] == "d0")
      return w["ranks"][0];
  return {};
}

} // namespace

TEST_CASE("a decode engine busy with traffic the router never saw vetoes "
          "local prefill, by the engine's own report") {
  disagg_cluster c{R"({"policy":"isl_or_load","eff_isl_threshold":64,)"
                   R"("decode_busy_threshold":0})",
                   "1"};
  auto prompt = tokens(700, 120);
  CHECK(c.complete(prompt, 4) == sim::continuation(prompt, 4));
  CHECK(c.metric(decisions + "{outcome=\"remote_prefill\"}") == 1);
  REQUIRE(eventually(
    [&] { return c.metric("outrider_router_index_entries") >= 60; }, 10s));

  // A long request straight to the decode engine (600 tokens, ~4 s at
  // speed 1; the test engines hold 256 blocks of 4 tokens): the router's
  // books know nothing of it.
  grpc::ClientContext busy_ctx;
  std::string busy_error;
  busy_ctx.set_deadline(std::chrono::system_clock::now() + 60s);
  std::thread busy{[&] {
    auto stub = vllm::Inference::NewStub(c.decode.channel());
    vllm::GenerateRequest req;
    auto p = tokens(20000, 64);
    req.mutable_token_ids()->mutable_ids()->Add(p.begin(), p.end());
    req.mutable_stopping()->set_max_new_tokens(600);
    vllm::GenerateResponse resp;
    auto st = stub->Generate(&busy_ctx, req, &resp); // cancelled below
    if (!st.ok() && st.error_code() != grpc::StatusCode::CANCELLED)
      busy_error = st.error_message();
  }};
  struct canceller {
    grpc::ClientContext& ctx;
    std::thread& t;
    ~canceller() {
      ctx.TryCancel();
      t.join();
    }
  } cancel_busy{busy_ctx, busy};

  INFO("busy request: " << busy_error);
  // Running on the engine (its own ground truth) before the router looks.
  std::string engine_load;
  REQUIRE(eventually(
    [&] {
      http_get(c.decode.debug, "/debug/load?rank=0", &engine_load);
      return engine_load.find("\"running\":1") != std::string::npos;
    },
    10s));
  INFO("busy request: " << busy_error);
  INFO("decode engine: " << engine_load << "; router: " << decode_rank(c));
  REQUIRE(eventually(
    [&] {
      auto r = decode_rank(c);
      return r.is_object() && r["engine_used_kv_blocks"].get<int64_t>() > 0;
    },
    15s));
  auto r = decode_rank(c);
  CHECK(r["active_decode_blocks"] == 0); // the books alone: not busy
  CHECK(r["engine_total_kv_blocks"].get<int64_t>() > 0);

  // Cached on the decode worker and short: local by ISL, vetoed by the
  // engine's report.
  auto longer = concat(prompt, tokens(8000, 4));
  CHECK(c.complete(longer, 4) == sim::continuation(longer, 4));
  CHECK(c.metric(decisions + "{outcome=\"local_prefill\"}") == 0);
  CHECK(c.metric(decisions + "{outcome=\"remote_prefill\"}") == 2);
  CHECK(c.metric(
          "outrider_router_disagg_decode_load_total{source=\"engine\"}") >= 1);
}
