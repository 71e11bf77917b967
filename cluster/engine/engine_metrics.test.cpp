#include "cluster/engine/engine_metrics.hpp"

#include <catch2/catch.hpp>

using outrider::engine::reexport;
using outrider::engine::reexport_limits;

namespace {

const std::vector<std::pair<std::string, std::string>> worker{
  {"outrider_worker", "w0"}};

} // namespace

TEST_CASE("an engine's exposition is re-exported with the worker's label") {
  auto r = reexport(
    R"(# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
# HELP vllm:e2e_request_latency_seconds Histogram of e2e request latency in seconds.
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{le="0.3",model_name="m"} 1.0
vllm:e2e_request_latency_seconds_bucket{le="+Inf",model_name="m"} 2.0
vllm:e2e_request_latency_seconds_sum{model_name="m"} 1.5
vllm:e2e_request_latency_seconds_count{model_name="m"} 2.0
process_open_fds 12 1700000000000
)",
    worker);
  CHECK(r.kept == 6);
  CHECK(r.malformed == 0);
  CHECK(r.text.find("# TYPE vllm:num_requests_running gauge\n"
                    "vllm:num_requests_running{outrider_worker=\"w0\","
                    "engine=\"0\",model_name=\"m\"} 3.0\n") !=
        std::string::npos);
  CHECK(r.text.find("vllm:e2e_request_latency_seconds_bucket{outrider_worker="
                    "\"w0\",le=\"+Inf\",model_name=\"m\"} 2.0") !=
        std::string::npos);
  // One TYPE per family; a family with none is untyped; timestamps go.
  CHECK(r.text.find("# TYPE vllm:e2e_request_latency_seconds histogram") !=
        std::string::npos);
  CHECK(r.text.find("# TYPE process_open_fds untyped\n"
                    "process_open_fds{outrider_worker=\"w0\"} 12\n") !=
        std::string::npos);
}

TEST_CASE("whatever is not the text format is dropped and counted") {
  auto r = reexport("good 1\n"
                    "9bad 1\n"
                    "bad{x=1} 2\n"
                    "bad{x=\"unterminated} 2\n"
                    "bad{__reserved=\"x\"} 1\n"
                    "nan_value NaN\n"
                    "bad_value one\n"
                    "bad_ts 1 soon\n"
                    "outrider_relay_tokens_total 99\n"
                    "# TYPE good counter\n"
                    "good 3\n" // the family again, split: dropped
                    "esc{a=\"q\\\"uote\\\\ and\\nline\"} 1\n"
                    "\x01\x02 garbage\n",
                    worker);
  CHECK(r.kept == 3); // good, nan_value, esc
  CHECK(r.malformed == 10);
  CHECK(r.text.find("outrider_relay_tokens_total") == std::string::npos);
  CHECK(r.text.find("esc{outrider_worker=\"w0\",a=\"q\\\"uote\\\\ "
                    "and\\nline\"} 1") != std::string::npos);
  // The engine cannot set the worker's label.
  auto spoof = reexport("m{outrider_worker=\"other\",x=\"1\"} 1\n", worker);
  CHECK(spoof.text.find("m{outrider_worker=\"w0\",x=\"1\"} 1") !=
        std::string::npos);
}

TEST_CASE("a huge or wide exposition is capped") {
  std::string many;
  for (int i = 0; i < 20000; ++i)
    many +=
      "m" + std::to_string(i % 700) + "{i=\"" + std::to_string(i) + "\"} 1\n";
  reexport_limits lim;
  lim.max_series = 1000;
  lim.max_families = 100;
  auto r = reexport(many, worker, lim);
  CHECK(r.kept <= 1000);
  CHECK(r.kept + r.over_limit + r.malformed == 20000);
  auto long_value =
    reexport("m{v=\"" + std::string(100000, 'x') + "\"} 1\n", worker);
  CHECK(long_value.text.size() < 400);
}
