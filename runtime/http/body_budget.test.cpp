// The body budget (http_limits::body_budget): bodies being read or held by
// handlers count against it, from their header; beyond it, a fast 503.

#include <chrono>
#include <mutex>
#include <thread>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "runtime/http/server.hpp"
#include "runtime/metrics.hpp"
#include "tests/eventually.hpp"
#include "tests/raw_client.hpp"

using namespace outrider::runtime;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

using client = outrider::test::raw_client;
using outrider::test::eventually;
using outrider::test::roundtrip;

double held_bytes(const std::string& server) {
  return global_metrics()
    .get_gauge("outrider_http_body_bytes", "", {{"server", server}})
    .value();
}

double refused_for_budget(const std::string& server) {
  return global_metrics()
    .get_counter("outrider_http_refused_total", "",
                 {{"server", server}, {"reason", "body_budget"}})
    .value();
}

std::string post(size_t length, const std::string& body) {
  return "POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: " +
         std::to_string(length) + "\r\n\r\n" + body;
}

} // namespace

TEST_CASE("request bodies beyond the body budget get a fast 503, and the "
          "budget comes back when the bodies are done") {
  const std::string name = "budget-test";
  http_limits lim;
  lim.body_bytes = 1000;
  lim.body_budget = 2500;
  // The handler keeps the exchange (and its body) until told to answer.
  std::mutex mtx;
  std::vector<std::shared_ptr<http_exchange>> kept;
  http_server server{
    name, http_server::async_handler{[&](std::shared_ptr<http_exchange> ex) {
      if (ex->request().body == "drop" || ex->request().method == "GET") {
        ex->drop_body();
        ex->respond({200, "text/plain", "dropped", {}});
        return;
      }
      std::lock_guard<std::mutex> guard{mtx};
      kept.push_back(std::move(ex));
    }},
    lim};
  REQUIRE_FALSE(server.start("127.0.0.1", 0));
  auto base_refused = refused_for_budget(name);
  REQUIRE(held_bytes(name) == 0);

  // Two bodies of 1,000 bytes, half sent: 2,000 of 2,500 held.
  client a{server.port()}, b{server.port()};
  REQUIRE(a.send(post(1000, std::string(500, 'a'))));
  REQUIRE(b.send(post(1000, std::string(500, 'b'))));
  REQUIRE(eventually([&] { return held_bytes(name) == 2000; }));

  // A third of 1,000 does not fit: 503 with Retry-After, its body unread.
  auto third = roundtrip(server.port(), post(1000, std::string(1000, 'c')));
  CHECK_THAT(third, StartsWith("HTTP/1.1 503"));
  CHECK_THAT(third, Contains("Retry-After: 1"));
  CHECK_THAT(third, Contains("too many request bodies in flight"));
  CHECK(refused_for_budget(name) == base_refused + 1);
  // A chunked body counts as the body limit (1,000): it does not fit either.
  auto chunked = roundtrip(server.port(),
                           "POST /b HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: "
                           "chunked\r\n\r\n4\r\ndrop\r\n0\r\n\r\n");
  CHECK_THAT(chunked, StartsWith("HTTP/1.1 503"));
  // A small body still fits beside them, and dropping it gives its share
  // back at once.
  auto small = roundtrip(server.port(), post(4, "drop"));
  CHECK_THAT(small, StartsWith("HTTP/1.1 200"));
  CHECK(held_bytes(name) == 2000);
  // A request without a body takes nothing.
  CHECK_THAT(roundtrip(server.port(), "GET /x HTTP/1.1\r\nHost: x\r\n\r\n"),
             StartsWith("HTTP/1.1 "));

  // a's body completes: the handler holds it (the share stays held) until
  // it answers and lets the exchange go.
  REQUIRE(a.send(std::string(500, 'a')));
  REQUIRE(eventually([&] {
    std::lock_guard<std::mutex> guard{mtx};
    return kept.size() == 1;
  }));
  CHECK(held_bytes(name) == 2000);
  {
    std::lock_guard<std::mutex> guard{mtx};
    kept.front()->respond({200, "text/plain", "ok", {}});
    kept.clear();
  }
  CHECK(held_bytes(name) == 1000);
  CHECK_THAT(a.read_response(), StartsWith("HTTP/1.1 200"));
  // Now the third fits.
  client c{server.port()};
  REQUIRE(c.send(post(1000, std::string(1000, 'c'))));
  REQUIRE(eventually([&] {
    std::lock_guard<std::mutex> guard{mtx};
    return kept.size() == 1;
  }));
  CHECK(held_bytes(name) == 2000);
  {
    std::lock_guard<std::mutex> guard{mtx};
    kept.clear(); // answered 500 by the exchange's end
  }
  CHECK(held_bytes(name) == 1000);
  // b's client goes away mid-body: its share comes back too.
  ::close(b.fd);
  b.fd = -1;
  REQUIRE(eventually([&] { return held_bytes(name) == 0; }));
  server.stop();
  CHECK(held_bytes(name) == 0);
}
