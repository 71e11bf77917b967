// Issue 33 row 5: request bodies. Bodies are dropped once parsed and little
// is read ahead (the first test); bodies being read or parsed together are
// bounded by the frontend's body budget (the second).

#include <thread>

#include "tests/e2e/hardening_support.hpp"
#include "tests/e2e/router_cluster.hpp"
#include "tests/raw_client.hpp"

using namespace outrider::test;
using namespace std::string_literals;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using json = nlohmann::json;

namespace {

// Sends what the socket takes without blocking, for up to `limit`: the
// bytes the peer accepted (kernel buffers included).
size_t offer(raw_client& c, const std::string& bytes,
             std::chrono::milliseconds limit) {
  size_t off = 0;
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (off < bytes.size() && std::chrono::steady_clock::now() < deadline) {
    auto n = ::send(c.fd, bytes.data() + off, bytes.size() - off,
                    MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0)
      off += static_cast<size_t>(n);
    else
      std::this_thread::sleep_for(5ms);
  }
  return off;
}

} // namespace

TEST_CASE("row 5: streams with 15 MB bodies, each followed by 15 MB of "
          "pipelined bytes, do not hold their bodies or read ahead",
          "[alone]") {
  // A slow engine: the 30 streams are all running while the RSS is read.
  // Without the body budget (the next test's subject): every body is read.
  cluster c{1,
            {.num_blocks = 16384, .extra = {"--speedup", "0.05"}},
            {"--http-body-budget-bytes", "0"}};
  REQUIRE(c.complete(tokens(1, 8), 1)["choices"].size() == 1);
  auto rss_before = proc_status(c.router->pid(), "VmRSS");
  constexpr int streams = 30;
  auto body = json{{"prompt", tokens(100, 8)},
                   {"max_tokens", 500},
                   {"stream", true},
                   {"user", std::string(15'000'000, 'u')}}
                .dump();
  auto request = "POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                 "Content-Type: application/json\r\nContent-Length: " +
                 std::to_string(body.size()) + "\r\n\r\n" + body;
  // What follows on each connection: the start of another request whose
  // 15 MB body the router must not park in memory.
  auto next = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: "
              "15000000\r\n\r\n" +
              std::string(15'000'000, 'n');
  std::vector<std::unique_ptr<raw_client>> clients;
  for (int i = 0; i < streams; ++i) {
    clients.push_back(std::make_unique<raw_client>(c.http_port));
    REQUIRE(clients.back()->connected());
    REQUIRE(clients.back()->send(request));
    offer(*clients.back(), next, 200ms);
  }
  // Under ASan each 15 MB body takes the tokenizer pool seconds to parse.
  REQUIRE(eventually(
    [&] { return c.sims[0]->running() == streams; },
    std::chrono::milliseconds{static_cast<long>(30'000 * time_allowance)}));
  auto rss_after = proc_status(c.router->pid(), "VmRSS");
  WARN("30 streams of 15 MB bodies + 15 MB pipelined: router RSS "
       << rss_before / 1024 << " -> " << rss_after / 1024 << " MB");
  // Before: 68 -> 541 MB (bodies held for the request's life, read-ahead
  // up to the body limit).
  CHECK(rss_after < rss_before + rss_growth_kb(150));
  clients.clear();
  CHECK(c.complete(tokens(1, 8), 2)["choices"].size() == 1);
}

TEST_CASE("row 5: bodies beyond the frontend's body budget get a fast 503 "
          "with Retry-After, smaller ones still pass, and the budget comes "
          "back") {
  // 32 MB: two 12 MB bodies at once, not three.
  cluster c{1, {}, {"--http-body-budget-bytes", "32000000"}};
  REQUIRE(c.complete(tokens(1, 8), 1)["choices"].size() == 1);
  const std::string held = "outrider_http_body_bytes{server=\"frontend\"}";
  const std::string refused =
    "outrider_http_refused_total{server=\"frontend\",reason=\"body_budget\"}";
  REQUIRE(c.router_metric(held) == 0);
  constexpr size_t size = 12'000'000;
  // A valid completion body of exactly `size` bytes.
  auto body = [&](uint32_t first) {
    auto j =
      json{{"prompt", tokens(first, 8)}, {"max_tokens", 2}, {"user", ""}};
    auto filler = size - j.dump().size();
    j["user"] = std::string(filler, 'u');
    auto text = j.dump();
    REQUIRE(text.size() == size);
    return text;
  };
  auto header = "POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                "Content-Type: application/json\r\nContent-Length: " +
                std::to_string(size) + "\r\n\r\n";
  // Two clients send their header and the first megabyte, then wait: their
  // bodies hold 24 MB of the budget.
  std::vector<std::string> bodies{body(100), body(200)};
  std::vector<std::unique_ptr<raw_client>> holders;
  for (int i = 0; i < 2; ++i) {
    holders.push_back(std::make_unique<raw_client>(c.http_port));
    REQUIRE(holders.back()->send(header + bodies[i].substr(0, 1'000'000)));
    REQUIRE(eventually(
      [&] { return c.router_metric(held) == double(size) * (i + 1); }, 10s));
  }
  // Eight more of the same size: none fits; each is answered at once with
  // 503 and Retry-After, in the API's error shape, before its body is read.
  for (int i = 0; i < 8; ++i) {
    raw_client late{c.http_port};
    REQUIRE(late.send(header));
    auto answer = late.read_response(10s);
    CHECK_THAT(answer, StartsWith("HTTP/1.1 503"));
    CHECK_THAT(answer, Contains("Retry-After: 1"));
    CHECK_THAT(answer, Contains("too many request bodies in flight"));
  }
  CHECK(c.router_metric(refused) == 8);
  // A small request fits in what is left, and is served.
  CHECK(c.complete(tokens(300, 8), 2)["choices"].size() == 1);
  // The two held bodies complete: both are served, and the budget is free
  // again (no share leaks).
  for (int i = 0; i < 2; ++i) {
    REQUIRE(holders[static_cast<size_t>(i)]->send(bodies[i].substr(1'000'000)));
    auto answer = holders[static_cast<size_t>(i)]->read_response(
      std::chrono::milliseconds{static_cast<long>(30'000 * time_allowance)});
    CHECK_THAT(answer, StartsWith("HTTP/1.1 200"));
  }
  REQUIRE(eventually([&] { return c.router_metric(held) == 0; }, 10s));
  // Now a body of that size is read again.
  raw_client again{c.http_port};
  REQUIRE(again.send(header + body(400)));
  CHECK_THAT(again.read_response(std::chrono::milliseconds{
               static_cast<long>(30'000 * time_allowance)}),
             StartsWith("HTTP/1.1 200"));
}
