// Issue 33's table, one test per row: what an attacker or a bad day broke,
// tried again against the real binaries. Each test failed on the code
// before its fix (the row and the commit are named in docs/testing.md).

#include <thread>

#include "tests/e2e/router_cluster.hpp"
#include "tests/raw_client.hpp"

using namespace outrider::test;
using namespace std::string_literals;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using json = nlohmann::json;

TEST_CASE("row 9: a request smuggled behind a Transfer-Encoding the router "
          "does not decode is refused with 400, and never answered") {
  cluster c{1};
  auto body = json{{"prompt", tokens(1, 8)}, {"max_tokens", 1}}.dump();
  // The "body" is a whole second request, as a proxy that framed the
  // first by its Transfer-Encoding would have forwarded it.
  auto inner = "POST /v1/completions HTTP/1.1\r\nContent-Length: " +
               std::to_string(body.size()) + "\r\n\r\n" + body;
  for (std::string te : {"gzip", "chunked, identity", "identity"}) {
    CAPTURE(te);
    auto out = roundtrip(c.http_port, "POST /v1/models HTTP/1.1\r\nHost: x\r\n"
                                      "Transfer-Encoding: " +
                                        te + "\r\n\r\n" + inner);
    CHECK_THAT(out, StartsWith("HTTP/1.1 400"));
    CHECK(count_of(out, "HTTP/1.1 ") == 1);
    CHECK_THAT(out, !Contains("choices"));
  }
  CHECK(c.complete(tokens(1, 8), 1)["choices"].size() == 1);
}

TEST_CASE("row 12: clients holding every status connection do not fail "
          "the pod's liveness or readiness probe") {
  raise_fd_limit();
  cluster c{1};
  // 1,100 kept-alive connections (the status server keeps 1,024 slots).
  std::vector<std::unique_ptr<raw_client>> held;
  int answered = 0;
  for (int i = 0; i < 1100; ++i) {
    held.push_back(std::make_unique<raw_client>(c.router_status));
    REQUIRE(held.back()->connected());
    held.back()->send("GET /live HTTP/1.1\r\nHost: x\r\n\r\n");
    if (StartsWith("HTTP/1.1 200").match(held.back()->read_response(5s)))
      ++answered;
  }
  CHECK(answered == 1100); // the idle ones give their slots up
  // Probes still get through, each on a slot of their own, fast.
  auto worst = 0ms;
  for (int i = 0; i < 20; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    CHECK(http_get(c.router_status, "/live") == 200);
    CHECK(http_get(c.router_status, "/ready") == 200);
    worst =
      std::max(worst, std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - t0));
  }
  WARN("1,100 kept-alive status connections: worst /live + /ready "
       << worst.count() << " ms");
  CHECK(worst < 500ms * time_allowance);
  std::string metrics;
  REQUIRE(http_get(c.router_status, "/metrics", &metrics) == 200);
  CHECK_THAT(metrics,
             Contains("outrider_http_idle_evictions_total{server=\"status\"}"));
  // Clients mid-request keep their slots; probes get reserved ones (the
  // unit tests of runtime/http cover that case).
}
