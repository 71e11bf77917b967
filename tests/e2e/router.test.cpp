// End-to-end tests of `outrider --role router` in front of real sidecars and
// simulated engines, all real processes on loopback.
#include <atomic>
#include <csignal>
#include <fstream>
#include <sstream>
#include <thread>

#include <catch2/catch.hpp>

#include "openengine.grpc.pb.h"
#include "sim/engine_core.hpp"
#include "tests/e2e/disagg_cluster.hpp"
#include "tests/e2e/router_cluster.hpp"
#include "tests/e2e/sidecar_process.hpp"
#include "tests/e2e/sim_process.hpp"
#include "vllm.grpc.pb.h"

using namespace outrider;
using namespace outrider::test;
using namespace std::chrono_literals;
using json = nlohmann::json;

TEST_CASE("requests go to the worker that holds their prefix") {
  cluster c{2};
  check_prefix_routing(c);
  double cached = c.router_metric("outrider_router_cached_blocks_total");
  double prompt = c.router_metric("outrider_router_prompt_blocks_total");
  CHECK(cached / prompt >= 0.9 * 16.0 / 17.0);
  // What the router chose, the engines served: nothing was evicted here.
  auto placed = [&](const char* of) {
    return c.router_metric(
      std::string("outrider_router_placed_blocks_total{of=\"") + of + "\"}");
  };
  REQUIRE(eventually([&] { return placed("served") >= 18 * 16; }, 10s));
  CHECK(placed("served") <= placed("chosen_overlap"));
  CHECK(placed("served") >= 0.9 * placed("chosen_overlap"));
}

TEST_CASE("the router targets the data-parallel rank holding the prefix") {
  cluster c{1, {.ranks = 2}};
  auto prefix = tokens(500, 40);
  warm(*c.sims[0], prefix, 1);
  REQUIRE(eventually(
    [&] { return c.router_metric("outrider_router_index_entries") >= 10; },
    10s));
  for (uint32_t i = 0; i < 4; ++i) {
    auto r = c.complete(concat(prefix, tokens(7000 + 10 * i, 3)), 2);
    CHECK(r["usage"]["prompt_tokens_details"]["cached_tokens"] == 40);
  }
}

TEST_CASE("a stream whose engine dies migrates and stays contiguous, over "
          "the relay and its mux, and under the mux when its sidecar dies") {
  // The mux: a dead sidecar takes down its stream, and every request on it.
  auto [dispatch, sidecar] = GENERATE(std::pair{std::string{"relay"}, false},
                                      std::pair{std::string{"mux"}, false},
                                      std::pair{std::string{"mux"}, true});
  INFO(dispatch << (sidecar ? ", the sidecar dies" : ", the engine dies"));
  cluster c{2,
            {.extra = {"--speedup", "2"}},
            {"--migration-limit", "1", "--dispatch", dispatch}};
  auto prefix = tokens(3000, 32);
  mid_stream_kill kill{c, prefix, sidecar}; // worker 0 serves it, then dies
  auto prompt = concat(prefix, tokens(100, 3));
  auto [code, body] = http(
    c.http_port, "POST", "/v1/completions",
    json{{"prompt", prompt}, {"max_tokens", 300}, {"stream", true}}.dump());
  REQUIRE(kill.join());
  CHECK(code == 200);
  auto [toks, done] = read_sse(body);
  CHECK(done);
  CHECK(toks == sim::continuation(prompt, 300));
  CHECK(c.router_metric("outrider_router_migrations_total") == 1);
  // The survivor carried the rest on a mux stream of its own.
  if (dispatch == "mux")
    CHECK(c.sides[1]->metric("outrider_relay_mux_streams").value_or(-1) == 1);
}

TEST_CASE("a restarted router rebuilds its index from the sidecars") {
  cluster c{2};
  auto prefix = tokens(4000, 48);
  warm(*c.sims[1], prefix);
  REQUIRE(eventually(
    [&] { return c.router_metric("outrider_router_index_entries") >= 12; },
    10s));
  auto entries = c.router_metric("outrider_router_index_entries");
  c.router->signal(SIGKILL);
  REQUIRE(c.router->wait(5s));
  c.start_router();
  REQUIRE(eventually(
    [&] { return c.router_metric("outrider_router_index_entries") == entries; },
    10s));
  auto r = c.complete(concat(prefix, tokens(50, 2)), 2);
  CHECK(r["usage"]["prompt_tokens_details"]["cached_tokens"] == 48);
}

TEST_CASE("the frontend answers bad requests with OpenAI-style errors") {
  cluster c{1};
  auto code_of = [&](const std::string& method, const std::string& path,
                     const std::string& body) {
    auto [code, text] = http(c.http_port, method, path, body);
    if (code >= 400) {
      auto j = json::parse(text, nullptr, false);
      CHECK(j.contains("error"));
      CHECK(j["error"]["message"].is_string());
    }
    return code;
  };
  CHECK(code_of("POST", "/v1/completions", "{not json") == 400);
  CHECK(code_of("POST", "/v1/completions", "[1,2]") == 400);
  CHECK(code_of("POST", "/v1/completions", R"({"prompt":"hello"})") == 400);
  CHECK(code_of("POST", "/v1/completions", R"({"prompt":[]})") == 400);
  CHECK(code_of("POST", "/v1/completions", R"({"prompt":[1,-2]})") == 400);
  CHECK(code_of("POST", "/v1/completions",
                R"({"prompt":[1,2],"max_tokens":"ten"})") == 400);
  CHECK(code_of("POST", "/v1/completions",
                R"({"prompt":[1,2],"max_tokens":0})") == 400);
  CHECK(code_of("POST", "/v1/completions",
                R"({"prompt":[1,2],"stream":"yes"})") == 400);
  CHECK(code_of("POST", "/v1/completions",
                R"({"prompt":[1,2],"model":"gpt-nothing"})") == 404);
  CHECK(code_of("GET", "/v1/completions", "") == 405);
  CHECK(code_of("GET", "/nowhere", "") == 404);
  // An engine-side refusal comes back as a client error, not a crash.
  CHECK(code_of("POST", "/v1/completions",
                R"({"prompt":[1,2],"max_tokens":900000})") == 400);
  auto [code, models] = http(c.http_port, "GET", "/v1/models");
  CHECK(code == 200);
  CHECK(json::parse(models)["data"][0]["id"] == "sim-model");
  CHECK(http_get(c.router_status, "/ready") == 200);
}

TEST_CASE("role all runs a whole cluster and a workload through it") {
  temp_dir work;
  child_process all{{OUTRIDER_BIN, "--role", "all", "--sim-engines", "2",
                     "--demo-requests", "12", "--data-dir", work.str(),
                     "--system-port", std::to_string(free_port()),
                     "--http-port", std::to_string(free_port()), "--grpc-port",
                     "0"}};
  auto code = all.wait(60s);
  INFO(all.output());
  if (!code) {
    // What the engines and sidecars said, to see which one stalled.
    for (const auto& f :
         std::filesystem::directory_iterator(work.path / "logs")) {
      std::ifstream in{f.path()};
      std::string text{std::istreambuf_iterator<char>{in}, {}};
      UNSCOPED_INFO(f.path().filename().string() << ":\n"
                                                 << text.substr(0, 4000));
    }
  }
  REQUIRE(code);
  CHECK(*code == 0);
  CHECK_THAT(all.output(),
             Catch::Matchers::Contains("requests: 12 ok, 0 failed"));
  CHECK_THAT(all.output(), Catch::Matchers::Contains("KV hit rate"));
  // The engines and sidecars are gone with it.
  CHECK(std::filesystem::is_empty(work.path / "discovery"));
}

TEST_CASE("the official openai client streams from the frontend") {
  temp_dir work;
  auto http_port = free_port();
  auto status_port = free_port();
  child_process all{{OUTRIDER_BIN, "--role", "all", "--sim-engines", "1",
                     "--data-dir", work.str(), "--system-port",
                     std::to_string(status_port), "--http-port",
                     std::to_string(http_port), "--grpc-port", "0"}};
  // Ready once the worker is listed and the router can place on it (the
  // listing comes from discovery, a moment before the router knows).
  REQUIRE(eventually(
    [&] {
      std::string body;
      if (http_get(http_port, "/v1/models", &body) != 200)
        return false;
      auto j = json::parse(body, nullptr, false);
      return j.is_object() && !j["data"].empty() &&
             metric_value(status_port, "outrider_router_workers") >= 1;
    },
    30s));
  auto prompt = tokens(42, 20);
  std::vector<std::string> args{
    "/usr/bin/node", OUTRIDER_SOURCE_DIR "/tests/node/openai_stream.mjs",
    "http://127.0.0.1:" + std::to_string(http_port) + "/v1", "sim-model", "12"};
  for (auto t : prompt)
    args.push_back(std::to_string(t));
  child_process node{args};
  auto code = node.wait(60s);
  INFO(node.output());
  REQUIRE(code == 0);
  auto out = node.output();
  auto doc = json::parse(out.substr(out.rfind('{', out.rfind("\"tokens\""))),
                         nullptr, false);
  REQUIRE(doc.is_object());
  CHECK(doc["tokens"].get<std::vector<uint32_t>>() ==
        sim::continuation(prompt, 12));
  CHECK(doc["finish"] == "length");
  CHECK(doc["chunks"].get<int>() >= 2);
  CHECK(doc["whole"].get<std::vector<uint32_t>>() ==
        sim::continuation(prompt, 12));
  CHECK(doc["usage"]["completion_tokens"] == 12);
  CHECK(doc["errorStatus"] == 404);
  all.signal(SIGTERM);
  CHECK(all.wait(20s) == 0);
}

TEST_CASE("isl_bounding: a long new prompt is prefilled remotely, a cached "
          "one locally") {
  disagg_cluster c{R"({"policy":"isl_bounding","eff_isl_threshold":64,)"
                   R"("eff_isl_ratio_threshold":0.7})"};
  auto prompt = tokens(600, 200); // 50 blocks, nothing cached
  CHECK(c.complete(prompt, 6) == sim::continuation(prompt, 6));
  CHECK(c.metric(decisions + "{outcome=\"remote_prefill\"}") == 1);
  CHECK(c.prefill.cache(0)["blocks"].size() == 50);
  CHECK(c.decode.cache(0)["blocks"].size() >= 50); // transferred, stored
  // The router learns the decode worker's blocks; the same prefix with a
  // short suffix is now cheap to prefill where it will be decoded.
  REQUIRE(eventually(
    [&] { return c.metric("outrider_router_index_entries") >= 100; }, 10s));
  auto longer = concat(prompt, tokens(9000, 8));
  CHECK(c.complete(longer, 6) == sim::continuation(longer, 6));
  CHECK(c.metric(decisions + "{outcome=\"local_prefill\"}") == 1);
  CHECK(c.metric(decisions + "{outcome=\"remote_prefill\"}") == 1);
}

TEST_CASE("prefill_load: an idle prefill worker gets the prefill") {
  disagg_cluster c{
    R"({"policy":"prefill_load","prefill_busy_threshold":100000})"};
  auto prompt = tokens(100, 40);
  CHECK(c.complete(prompt, 4) == sim::continuation(prompt, 4));
  auto again = concat(prompt, tokens(5000, 4));
  CHECK(c.complete(again, 4) == sim::continuation(again, 4));
  // Not busy: both prefilled remotely, whatever the decode worker holds.
  CHECK(c.metric(decisions + "{outcome=\"remote_prefill\"}") == 2);
  CHECK(c.metric(decisions + "{outcome=\"local_prefill\"}") == 0);
}

TEST_CASE("bad disaggregation settings are refused at start") {
  for (auto args : std::vector<std::vector<std::string>>{
         {"--router-conditional-disagg", "--router-mode", "round-robin"},
         {"--router-conditional-disagg", "--router-conditional-disagg-config",
          R"({"eff_isl_ratio_threshold":1.5})"},
         {"--router-conditional-disagg", "--router-conditional-disagg-config",
          R"({"policy":"isl_bounding","bogus":1})"}}) {
    args.insert(args.begin(), {OUTRIDER_BIN, "--role", "router"});
    child_process p{args};
    auto code = p.wait(10s);
    INFO(p.output());
    CHECK(code == 2);
    CHECK_THAT(p.output(), Catch::Matchers::Contains("outrider: error:"));
  }
}

TEST_CASE("token-level clients use the router's OpenEngine gRPC frontend") {
  cluster c{1};
  auto stub = openengine::v1::Inference::NewStub(
    grpc::CreateChannel("127.0.0.1:" + std::to_string(c.grpc_port),
                        grpc::InsecureChannelCredentials()));
  auto prompt = tokens(77, 30);
  auto run = [&](const std::vector<uint32_t>& p, const std::string& model,
                 std::vector<uint32_t>* out) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 20s);
    openengine::v1::GenerateRequest req;
    req.set_model(model);
    req.mutable_token_ids()->mutable_ids()->Add(p.begin(), p.end());
    req.mutable_stopping()->set_max_tokens(9);
    auto reader = stub->Generate(&ctx, req);
    openengine::v1::GenerateResponse resp;
    while (reader->Read(&resp))
      if (resp.has_token() && out)
        for (const auto& t : resp.token().tokens())
          out->push_back(t.token_id());
    return reader->Finish();
  };
  std::vector<uint32_t> got;
  REQUIRE(run(prompt, "", &got).ok());
  CHECK(got == sim::continuation(prompt, 9));
  CHECK(run({}, "", nullptr).error_code() ==
        grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(run(prompt, "no-such", nullptr).error_code() ==
        grpc::StatusCode::NOT_FOUND);
}

TEST_CASE("direct dispatch streams straight from the engines, in each "
          "dialect") {
  auto protocol = GENERATE(std::string{"vllm"}, std::string{"openengine"},
                           std::string{"sglang"});
  cluster c{2, {}, {"--dispatch", "direct"}, {"--engine-protocol", protocol}};
  auto prefix = tokens(2000, 40);
  warm(*c.sims[1], prefix);
  REQUIRE(eventually(
    [&] { return c.router_metric("outrider_router_index_entries") >= 10; },
    10s));
  auto prompt = concat(prefix, tokens(60000 % 31000, 5));
  auto r = c.complete(prompt, 7);
  CHECK(r["choices"][0]["token_ids"].get<std::vector<uint32_t>>() ==
        sim::continuation(prompt, 7));
  // Nothing went through the relays.
  for (auto& s : c.sides)
    CHECK(s->metric("outrider_relay_tokens_total").value_or(0) == 0);
  if (protocol != "vllm") // vLLM reports no cached tokens
    CHECK(r["usage"]["prompt_tokens_details"]["cached_tokens"] == 40);
}

TEST_CASE("isl_or_load: short cached prompts go local, and a busy decode "
          "worker vetoes") {
  // eff_isl_threshold 64: the cached case qualifies by ISL; the prefill
  // worker is never busy here (threshold far above any queue).
  disagg_cluster c{R"({"policy":"isl_or_load","eff_isl_threshold":64,)"
                   R"("prefill_busy_threshold":1000000})"};
  auto prompt = tokens(700, 120);
  CHECK(c.complete(prompt, 4) == sim::continuation(prompt, 4));
  CHECK(c.metric(decisions + "{outcome=\"remote_prefill\"}") == 1);
  REQUIRE(eventually(
    [&] { return c.metric("outrider_router_index_entries") >= 60; }, 10s));
  auto longer = concat(prompt, tokens(8000, 4));
  CHECK(c.complete(longer, 4) == sim::continuation(longer, 4));
  CHECK(c.metric(decisions + "{outcome=\"local_prefill\"}") == 1);

  // decode_busy_threshold 0: any held decode block on the decode worker
  // vetoes local prefill. A long request keeps it busy meanwhile.
  disagg_cluster v{R"({"policy":"isl_or_load","eff_isl_threshold":64,)"
                   R"("decode_busy_threshold":0})",
                   "1"}; // slow enough that the busy request outlasts the
                         // vetoed one's placement under ASan on a busy
                         // machine (at speed 2 it once ended first)
  CHECK(v.complete(prompt, 4) == sim::continuation(prompt, 4));
  REQUIRE(eventually(
    [&] { return v.metric("outrider_router_index_entries") >= 60; }, 10s));
  std::atomic<bool> busy_done{false};
  std::thread busy([&] {
    http(v.http_port, "POST", "/v1/completions",
         json{{"prompt", tokens(20000, 8)}, {"max_tokens", 900}}.dump());
    busy_done = true;
  });
  // Until the decode load the policy reads is the busy request's: the
  // engine's own report while fresh (it lags by a poll), else the books.
  auto decode_load = [&] {
    std::string body;
    if (http_get(v.status, "/debug/status", &body) != 200)
      return 0.0;
    auto doc = json::parse(body, nullptr, false);
    if (!doc.is_object())
      return 0.0;
    for (const auto& w : doc["workers"])
      if (w["id"] == "d0" && !w["ranks"].empty()) {
        const auto& r = w["ranks"][0];
        auto engine = r["engine_used_kv_blocks"].get<double>();
        return engine >= 0 ? engine : r["active_decode_blocks"].get<double>();
      }
    return 0.0;
  };
  auto decided = [&] {
    return v.metric(decisions + "{outcome=\"local_prefill\"}") +
           v.metric(decisions + "{outcome=\"remote_prefill\"}");
  };
  // The first request and the busy one decided, and the load is there.
  REQUIRE(eventually([&] { return decided() >= 2 && decode_load() > 0; }, 10s));
  // Counted around the vetoed request alone: where the busy one went
  // depended on what d0 reported when it came.
  auto local_before = v.metric(decisions + "{outcome=\"local_prefill\"}");
  auto remote_before = v.metric(decisions + "{outcome=\"remote_prefill\"}");
  CHECK(v.complete(longer, 4) == sim::continuation(longer, 4));
  // Still running once the vetoed request is done: it ran through that
  // placement. Under ASan on a loaded machine it has ended first (twice):
  // then this run cannot judge the veto (the unit test of the policy does).
  bool overlapped = !busy_done.load();
  busy.join();
  if (overlapped) {
    CHECK(v.metric(decisions + "{outcome=\"local_prefill\"}") == local_before);
    CHECK(v.metric(decisions + "{outcome=\"remote_prefill\"}") ==
          remote_before + 1);
  } else {
    WARN("the busy request ended before the vetoed one was placed; the "
         "veto is not checked in this run");
  }
}

TEST_CASE("a client that disconnects cancels the request on the engine, "
          "over the relay and its mux") {
  auto dispatch = GENERATE(std::string{"relay"}, std::string{"mux"});
  INFO(dispatch);
  cluster c{1, {.extra = {"--speedup", "1"}}, {"--dispatch", dispatch}};
  auto prompt = tokens(300, 8);
  // curl is killed mid-stream, once its first event has arrived (a fixed
  // --max-time raced the first token on a busy machine under ASan).
  child_process curl{
    {"/usr/bin/curl", "-s", "-N", "-X", "POST",
     "http://127.0.0.1:" + std::to_string(c.http_port) + "/v1/completions",
     "--data-binary",
     json{{"prompt", prompt}, {"max_tokens", 900}, {"stream", true}}.dump()}};
  CHECK(eventually(
    [&] { return curl.output().find("data: ") != std::string::npos; }, 30s));
  curl.signal(SIGKILL);
  curl.wait(20s);
  auto running = [&] {
    std::string body;
    if (http_get(c.sims[0]->debug, "/debug/load?rank=0", &body) != 200)
      return -1;
    return json::parse(body)["running"].get<int>();
  };
  CHECK(eventually([&] { return running() == 0; }, 20s));
  std::string relay_metrics;
  c.sides[0]->get("/metrics", &relay_metrics);
  INFO(
    relay_metrics.substr(relay_metrics.find("outrider_relay_requests"), 400));
  CHECK(eventually(
    [&] {
      return c.sides[0]->metric(
               "outrider_relay_requests_total{outcome=\"cancelled\"}") == 1.0;
    },
    20s));
}

TEST_CASE("the example cluster config file runs as it is") {
  temp_dir work;
  // Only the ports and directories differ from deploy/local-cluster.yaml.
  child_process all{
    {OUTRIDER_BIN, "--config", OUTRIDER_SOURCE_DIR "/deploy/local-cluster.yaml",
     "--data-dir", work.str(), "--system-port", std::to_string(free_port()),
     "--http-port", std::to_string(free_port()), "--grpc-port", "0",
     "--demo-requests", "9"}};
  auto code = all.wait(60s);
  INFO(all.output());
  REQUIRE(code);
  CHECK(*code == 0);
  CHECK_THAT(all.output(), Catch::Matchers::Contains("3 workers, kv routing"));
  CHECK_THAT(all.output(), Catch::Matchers::Contains("requests: 9 ok"));
}
