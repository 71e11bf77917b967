// The frontend's answers when a request cannot be served at all: a streamed
// request that fails before its first token gets an HTTP error status, as
// OpenAI's API answers (not a 200 and an error event), after the router
// waited briefly for a worker to appear.

#include "tests/e2e/router_cluster.hpp"

using namespace outrider::test;
using json = nlohmann::json;

TEST_CASE("a streamed request with no worker gets 503 after a short wait, "
          "not a 200 and an error event") {
  cluster c{0};
  auto t0 = std::chrono::steady_clock::now();
  auto [code, body] = http(
    c.http_port, "POST", "/v1/completions",
    json{{"prompt", tokens(1, 8)}, {"max_tokens", 4}, {"stream", true}}.dump());
  auto waited = std::chrono::steady_clock::now() - t0;
  INFO(body);
  CHECK(code == 503);
  auto doc = json::parse(body, nullptr, false);
  REQUIRE(doc.is_object());
  CHECK(doc["error"]["message"] == "no worker is available");
  CHECK(body.find("data:") == std::string::npos);
  // It waited for a worker to register (a router that just started, a
  // sidecar between restart and registration), then gave up, bounded.
  CHECK(waited >= 2500ms);
  CHECK(waited < 15s);
  // Non-streamed: the same.
  auto plain = http(c.http_port, "POST", "/v1/completions",
                    json{{"prompt", tokens(1, 8)}, {"max_tokens", 4}}.dump());
  CHECK(plain.first == 503);
}
