// The engine's own metrics on the sidecar's /metrics (--engine-metrics-url):
// the simulator's vLLM gauges re-exported with the worker's label, and an
// engine endpoint that sends garbage, outrider's own names, a split family
// and far too many series leaves a /metrics that promtool still accepts;
// an OpenEngine engine's load (GetLoad) under outrider's own names.

#include <fstream>
#include <sstream>
#include <thread>

#include "runtime/http/server.hpp"
#include "tests/e2e/router_cluster.hpp"
#include "vllm.grpc.pb.h"

using namespace outrider::test;

namespace {

// promtool's verdict on an exposition: 0 when it parses and has no lint
// problem but the one vLLM's own names carry ("metric names should not
// contain ':'": a naming convention, kept so that vLLM's dashboards and
// autoscalers find their series); the problems otherwise.
std::pair<int, std::string> promtool_check(const std::string& text) {
  temp_dir dir;
  auto path = dir.str() + "/metrics.txt";
  std::ofstream(path) << text;
  int status = 0;
  auto out =
    command_output("promtool check metrics < " + path + " 2>&1", &status);
  std::string left;
  std::istringstream lines{out};
  for (std::string line; std::getline(lines, line);)
    if (line.find("metric names should not contain ':'") == std::string::npos)
      left += line + "\n";
  return {status == 0 || left.empty() ? 0 : 1, left};
}

} // namespace

TEST_CASE("engine metrics: the simulator's vLLM gauges on the sidecar's "
          "/metrics with the worker's label, valid for promtool") {
  sim_process sim{{}};
  REQUIRE(sim.wait_serving(10s));
  sidecar_process side{
    sim.endpoint(),
    nullptr,
    {"--worker-id", "w-7", "--engine-metrics-url",
     "http://127.0.0.1:" + std::to_string(sim.debug) + "/metrics",
     "--engine-metrics-interval", "200ms"}};
  std::string text;
  REQUIRE(eventually(
    [&] {
      return side.get("/metrics", &text) == 200 &&
             text.find("vllm:num_requests_running{outrider_worker=\"w-7\","
                       "engine=\"0\",model_name=") != std::string::npos;
    },
    15s));
  CHECK(text.find("# TYPE vllm:kv_cache_usage_perc gauge") !=
        std::string::npos);
  CHECK(side.metric(R"(outrider_engine_metrics_scrapes_total{outcome="ok"})")
          .value_or(0) >= 1);
  CHECK(side.metric("outrider_engine_metrics_series").value_or(0) == 3);
  auto [rc, lint] = promtool_check(text);
  INFO(lint);
  CHECK(rc == 0);
  // The engine gone: its series leave within three intervals, the rest
  // stays.
  sim.proc.reset();
  CHECK(eventually(
    [&] {
      return side.get("/metrics", &text) == 200 &&
             text.find("vllm:num_requests_running") == std::string::npos;
    },
    15s));
  CHECK(
    side.metric(R"(outrider_engine_metrics_scrapes_total{outcome="failed"})")
      .value_or(0) >= 1);
}

TEST_CASE("engine metrics: an engine that sends garbage, outrider's own "
          "names and too many series leaves a valid /metrics") {
  std::string hostile =
    "# TYPE ok_total counter\nok_total{a=\"1\"} 5\n"
    "outrider_registered 0\n"                 // would shadow our own
    "bad{x=1} 2\nbad line\n\x01\x02\x03\n"    // not the format
    "# TYPE ok_total gauge\n"                 // typed twice
    "split 1\nother 1\nsplit 2\n"             // a family split in two
    "label{outrider_worker=\"spoofed\"} 1\n"; // cannot set our label
  for (int i = 0; i < 8000; ++i)
    hostile += "wide{i=\"" + std::to_string(i) + "\"} 1\n";
  outrider::runtime::http_server engine{
    "engine",
    outrider::runtime::http_server::handler{
      [&](const outrider::runtime::http_request&) {
        return outrider::runtime::http_response{200, "text/plain", hostile, {}};
      }}};
  REQUIRE_FALSE(engine.start("127.0.0.1", 0));
  sim_process sim{{}};
  REQUIRE(sim.wait_serving(10s));
  sidecar_process side{sim.endpoint(),
                       nullptr,
                       {"--worker-id", "w-8", "--engine-metrics-url",
                        "http://127.0.0.1:" + std::to_string(engine.port()),
                        "--engine-metrics-interval", "200ms"}};
  std::string text;
  REQUIRE(eventually(
    [&] {
      return side.get("/metrics", &text) == 200 &&
             text.find("ok_total{outrider_worker=\"w-8\",a=\"1\"} 5") !=
               std::string::npos;
    },
    15s));
  auto [rc, lint] = promtool_check(text);
  INFO(lint.substr(0, 2000));
  CHECK(rc == 0);
  // The sidecar's own outrider_registered, once: the engine's is dropped.
  size_t own = 0;
  for (auto at = text.find("\noutrider_registered "); at != std::string::npos;
       at = text.find("\noutrider_registered ", at + 1))
    ++own;
  CHECK(own == 1);
  CHECK(text.find("spoofed") == std::string::npos);
  CHECK(side.metric("outrider_engine_metrics_series").value_or(0) <= 5000);
  CHECK(
    side.metric(R"(outrider_engine_metrics_dropped_total{reason="malformed"})")
      .value_or(0) >= 5);
  CHECK(
    side.metric(R"(outrider_engine_metrics_dropped_total{reason="over_limit"})")
      .value_or(0) >= 3000);
  engine.stop(std::chrono::milliseconds{500});
}

TEST_CASE("engine metrics: a bad --engine-metrics-url stops the sidecar "
          "with exit 2") {
  for (const char* bad : {"ftp://x:1/metrics", "http://nohost"}) {
    child_process p{{outrider_bin(), "--role", "sidecar", "--engine-endpoint",
                     "unix:///tmp/no-engine.sock", "--engine-metrics-url",
                     bad}};
    INFO(bad << ": " << p.output());
    CHECK(p.wait(20s) == 2);
  }
}

TEST_CASE("engine load: an OpenEngine engine's GetLoad under outrider's "
          "names, per rank, following its requests, and none from an engine "
          "without the service") {
  sim_process sim{{.num_blocks = 1024, .extra = {"--speedup", "0.05"}}};
  REQUIRE(sim.wait_serving(10s));
  sidecar_process side{
    sim.endpoint(), nullptr, {"--engine-metrics-interval", "200ms"}};
  const std::string running =
    R"(outrider_engine_requests{state="running",dp_rank="0"})";
  REQUIRE(eventually(
    [&] {
      return side
               .metric(R"(outrider_engine_kv_blocks{state="total",)"
                       R"(dp_rank="0"})")
               .value_or(0) == 1024;
    },
    10s));
  CHECK(side.metric(running).value_or(-1) == 0);
  CHECK(side.metric(R"(outrider_engine_load_reports_total{outcome="ok"})")
          .value_or(0) >= 1);
  CHECK(side.metric("outrider_engine_load_age_seconds").value_or(-1) >= 0);
  // A slow request straight on the engine: running, its blocks in use.
  grpc::ClientContext call;
  std::thread slow([&] {
    auto stub = vllm::Inference::NewStub(sim.channel());
    vllm::GenerateRequest req;
    auto prompt = tokens(100, 400);
    req.mutable_token_ids()->mutable_ids()->Add(prompt.begin(), prompt.end());
    req.mutable_stopping()->set_max_new_tokens(200);
    vllm::GenerateResponse resp;
    stub->Generate(&call, req, &resp); // cancelled below
  });
  CHECK(eventually(
    [&] {
      return side.metric(running).value_or(0) == 1 &&
             side.metric(R"(outrider_engine_kv_blocks{state="used",)"
                         R"(dp_rank="0"})")
                 .value_or(0) >= 100;
    },
    15s));
  CHECK(side.metric(R"(outrider_engine_tokens{state="running"})").value_or(0) >=
        400);
  call.TryCancel();
  slow.join();

  // vLLM's own gRPC only: no OpenEngine service, no outrider gauges.
  sim_process vllm{{.extra = {"--protocol", "vllm"}}};
  REQUIRE(vllm.wait_serving(10s));
  sidecar_process plain{
    vllm.endpoint(), nullptr, {"--engine-metrics-interval", "200ms"}};
  REQUIRE(eventually(
    [&] {
      return plain
               .metric(
                 R"(outrider_engine_load_reports_total{outcome="unimplemented"})")
               .value_or(0) >= 1;
    },
    10s));
  std::string text;
  REQUIRE(plain.get("/metrics", &text) == 200);
  CHECK(text.find("outrider_engine_kv_blocks{") == std::string::npos);
  CHECK(plain.metric("outrider_engine_load_age_seconds").value_or(0) == -1);
}
