#include "runtime/http/server.hpp"

#include <atomic>
#include <chrono>
#include <mutex>
#include <sys/socket.h>
#include <thread>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "runtime/status.hpp"
#include "tests/eventually.hpp"
#include "tests/raw_client.hpp"

using namespace outrider::runtime;
using namespace std::chrono_literals;
using namespace std::string_literals;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

using steady = std::chrono::steady_clock;
using client = outrider::test::raw_client;
using outrider::test::count_of;
using outrider::test::eventually;
using outrider::test::roundtrip;

struct served {
  http_server server;
  explicit served(http_limits lim = {})
    : server("test", http_server::handler{[](const http_request& r) {
               if (r.path == "/throw")
                 throw std::runtime_error("boom");
               http_response resp;
               resp.body = r.method + " " + r.path + " " + r.body;
               return resp;
             }},
             lim) {
    REQUIRE_FALSE(server.start("127.0.0.1", 0));
  }
};

// `n` connections each mid-request (a header half sent), once the server
// has read them: none is idle, so none gives its slot up.
std::vector<std::unique_ptr<client>> hold_mid_request(served& s, size_t n) {
  std::vector<std::unique_ptr<client>> held;
  for (size_t i = 0; i < n; ++i) {
    held.push_back(std::make_unique<client>(s.server.port()));
    held.back()->send("GET /held");
  }
  REQUIRE(eventually([&] {
    return s.server.connections() == n && s.server.idle_connections() == 0;
  }));
  return held;
}

} // namespace

TEST_CASE("a well-formed request reaches the handler") {
  served s;
  auto resp = roundtrip(s.server.port(), "POST /x?q=1 HTTP/1.1\r\nHost: a\r\n"
                                         "Content-Length: 5\r\n\r\nhello");
  CHECK_THAT(resp, StartsWith("HTTP/1.1 200 OK\r\n"));
  CHECK_THAT(resp, Contains("Content-Length: 13\r\n"));
  CHECK_THAT(resp, Contains("\r\n\r\nPOST /x hello"));
}

TEST_CASE("malformed requests get HTTP errors, not the handler") {
  served s;
  auto p = s.server.port();
  CHECK_THAT(roundtrip(p, "garbage\r\n\r\n"), StartsWith("HTTP/1.1 400"));
  CHECK_THAT(roundtrip(p, "GET nopath HTTP/1.1\r\n\r\n"),
             StartsWith("HTTP/1.1 400"));
  CHECK_THAT(roundtrip(p, "GET / HTTP/2.0\r\n\r\n"),
             StartsWith("HTTP/1.1 505"));
  CHECK_THAT(roundtrip(p, "GET / HTTP/1.1\r\nno colon here\r\n\r\n"),
             StartsWith("HTTP/1.1 400"));
  CHECK_THAT(roundtrip(p, "POST / HTTP/1.1\r\nContent-Length: -3\r\n\r\n"),
             StartsWith("HTTP/1.1 400"));
  auto too_large =
    roundtrip(p, "POST / HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n");
  CHECK_THAT(too_large, StartsWith("HTTP/1.1 413"));
  // The server's own refusals have OpenAI's error shape, as the API's do.
  auto body = too_large.substr(too_large.find("\r\n\r\n") + 4);
  auto err = nlohmann::json::parse(body, nullptr, false);
  REQUIRE(err.is_object());
  CHECK(err["error"]["code"] == "body_too_large");
  CHECK(err["error"]["type"] == "invalid_request_error");
  CHECK(err["error"]["param"].is_null());
  CHECK(err["error"]["message"].is_string());
  CHECK_THAT(roundtrip(p, "GET / HTTP/1.1\r\nX: " + std::string(20000, 'a')),
             StartsWith("HTTP/1.1 431"));
  std::string many = "GET / HTTP/1.1\r\n";
  for (int i = 0; i < 150; ++i)
    many += "X-" + std::to_string(i) + ": 1\r\n";
  CHECK_THAT(roundtrip(p, many + "\r\n"), StartsWith("HTTP/1.1 431"));
  CHECK_THAT(roundtrip(p, "GET /a\0b HTTP/1.1\r\n\r\n"s),
             StartsWith("HTTP/1.1 400"));
}

TEST_CASE("repeated or conflicting Content-Length is refused") {
  served s;
  auto p = s.server.port();
  CHECK_THAT(roundtrip(p, "POST / HTTP/1.1\r\nContent-Length: 2\r\n"
                          "Content-Length: 2\r\n\r\nab"),
             StartsWith("HTTP/1.1 400"));
  CHECK_THAT(roundtrip(p, "POST / HTTP/1.1\r\nContent-Length: 2\r\n"
                          "Content-Length: 3\r\n\r\nabc"),
             StartsWith("HTTP/1.1 400"));
  CHECK_THAT(roundtrip(p, "POST / HTTP/1.1\r\nContent-Length: 2, 2\r\n\r\nab"),
             StartsWith("HTTP/1.1 400"));
  CHECK_THAT(roundtrip(p, "POST / HTTP/1.1\r\nContent-Length: 2\r\n"
                          "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
             StartsWith("HTTP/1.1 400"));
}

TEST_CASE("a Transfer-Encoding other than one final chunked is refused and "
          "closed, so a body is never read as the next request") {
  served s;
  auto p = s.server.port();
  const std::string smuggled = "GET /smuggled HTTP/1.1\r\n\r\n";
  for (std::string te :
       {"Transfer-Encoding: gzip\r\n",
        "Transfer-Encoding: chunked, identity\r\n",
        "Transfer-Encoding: identity\r\nContent-Length: 0\r\n",
        "Transfer-Encoding: gzip, chunked\r\n",
        "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
        "Transfer-Encoding: xchunked\r\n"}) {
    CAPTURE(te);
    auto out = roundtrip(p, "POST / HTTP/1.1\r\n" + te + "\r\n" + smuggled);
    CHECK_THAT(out, StartsWith("HTTP/1.1 400"));
    CHECK_THAT(out, !Contains("/smuggled"));
    CHECK_THAT(out, Contains("Connection: close"));
  }
  // HTTP/1.0 has no chunked coding: faulty framing.
  CHECK_THAT(roundtrip(p, "POST / HTTP/1.0\r\nTransfer-Encoding: chunked"
                          "\r\n\r\n0\r\n\r\n" +
                            smuggled),
             StartsWith("HTTP/1.0 400"));
  // One chunked, in any case and with spaces, is read as chunked.
  CHECK_THAT(roundtrip(p, "POST /c HTTP/1.1\r\nTransfer-Encoding:  Chunked \r\n"
                          "Connection: close\r\n\r\n3\r\nabc\r\n0\r\n\r\n"),
             Contains("POST /c abc"));
}

TEST_CASE("invalid UTF-8 in the target or a header is refused") {
  served s;
  auto p = s.server.port();
  CHECK_THAT(roundtrip(p, "GET /\xff HTTP/1.1\r\n\r\n"),
             StartsWith("HTTP/1.1 400"));
  CHECK_THAT(roundtrip(p, "GET / HTTP/1.1\r\nX: \xc3\x28\r\n\r\n"),
             StartsWith("HTTP/1.1 400"));
  // Well-formed UTF-8 passes.
  CHECK_THAT(roundtrip(p, "GET /caf\xc3\xa9 HTTP/1.1\r\n\r\n"),
             StartsWith("HTTP/1.1 200"));
}

TEST_CASE("keep-alive and pipelined requests are answered in order") {
  served s;
  client c{s.server.port()};
  c.send("GET /one HTTP/1.1\r\n\r\nPOST /two HTTP/1.1\r\nContent-Length: 1"
         "\r\n\r\nxGET /three HTTP/1.1\r\n\r\n");
  auto out = c.read_until(
    [](const std::string& t) { return count_of(t, "HTTP/1.1 200") == 3; });
  REQUIRE(count_of(out, "HTTP/1.1 200") == 3);
  auto one = out.find("GET /one");
  auto two = out.find("POST /two x");
  auto three = out.find("GET /three");
  CHECK(one < two);
  CHECK(two < three);
  CHECK(three != std::string::npos);
  // The connection stays open for more.
  c.send("GET /four HTTP/1.1\r\n\r\n");
  CHECK_THAT(c.read_until([](const std::string& t) {
    return t.find("/four") != std::string::npos;
  }),
             Contains("GET /four"));
}

TEST_CASE("chunked request bodies, HEAD and 100-continue") {
  served s;
  auto p = s.server.port();
  auto chunked = roundtrip(p, "POST /c HTTP/1.1\r\nTransfer-Encoding: chunked"
                              "\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n");
  CHECK_THAT(chunked, Contains("POST /c abcde"));
  auto head = roundtrip(p, "HEAD /h HTTP/1.1\r\n\r\n");
  CHECK_THAT(head, StartsWith("HTTP/1.1 200"));
  CHECK_THAT(head, Contains("Content-Length: 8\r\n"));
  CHECK(head.find("HEAD /h") == std::string::npos); // no body
  client c{p};
  c.send("POST /e HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2"
         "\r\n\r\n");
  CHECK_THAT(c.read_until([](const std::string& t) {
    return t.find("\r\n\r\n") != std::string::npos;
  }),
             StartsWith("HTTP/1.1 100 Continue"));
  c.send("ok");
  CHECK_THAT(c.read_until([](const std::string& t) {
    return t.find("POST /e ok") != std::string::npos;
  }),
             Contains("POST /e ok"));
}

TEST_CASE("a handler's exception becomes a 500") {
  served s;
  CHECK_THAT(roundtrip(s.server.port(), "GET /throw HTTP/1.1\r\n\r\n"),
             StartsWith("HTTP/1.1 500"));
}

TEST_CASE("a request not complete within the read deadline gets 408") {
  http_limits lim;
  lim.read_timeout = 300ms;
  served s{lim};
  client silent{s.server.port()};
  silent.send("GET / HTTP/1.1\r\n");
  CHECK_THAT(silent.read_all(5s), StartsWith("HTTP/1.1 408"));
  // A body dripped byte by byte does not extend the deadline.
  client drip{s.server.port()};
  drip.send("POST / HTTP/1.1\r\nContent-Length: 1000\r\n\r\n");
  std::string got;
  auto started = steady::now();
  for (int i = 0; i < 200 && got.empty(); ++i) {
    drip.send("x");
    got =
      drip.read_until([](const std::string& t) { return !t.empty(); }, 20ms);
  }
  CHECK_THAT(got, StartsWith("HTTP/1.1 408"));
  CHECK(steady::now() - started < 3s);
}

TEST_CASE("an idle kept-alive connection is closed") {
  http_limits lim;
  lim.idle_timeout = 200ms;
  served s{lim};
  client c{s.server.port()};
  c.send("GET / HTTP/1.1\r\n\r\n");
  c.read_until([](const std::string& t) { return !t.empty(); });
  CHECK(c.closed_within(5s));
}

TEST_CASE("beyond max connections a fast 503 with Retry-After") {
  http_limits lim;
  lim.max_connections = 3;
  served s{lim};
  auto held = hold_mid_request(s, 3);
  client over{s.server.port()};
  auto out = over.read_all(5s);
  CHECK_THAT(out, StartsWith("HTTP/1.1 503"));
  CHECK_THAT(out, Contains("Retry-After: 1"));
  held.clear(); // room again
  REQUIRE(eventually([&] { return s.server.connections() == 0; }));
  CHECK_THAT(roundtrip(s.server.port(), "GET / HTTP/1.1\r\n\r\n"),
             StartsWith("HTTP/1.1 200"));
}

TEST_CASE("beyond max connections, reserved slots still answer a probe "
          "path once, and refuse other paths") {
  http_limits lim;
  lim.max_connections = 3;
  lim.reserved_connections = 2;
  lim.reserved_paths = {"/live"};
  lim.reserved_read_timeout = 3s;
  served s{lim};
  auto held = hold_mid_request(s, 3);
  // A probe: answered, and the connection closed after it.
  auto live = roundtrip(s.server.port(), "GET /live?x=1 HTTP/1.1\r\n\r\n");
  CHECK_THAT(live, StartsWith("HTTP/1.1 200"));
  CHECK_THAT(live, Contains("Connection: close"));
  auto other = roundtrip(s.server.port(), "GET /other HTTP/1.1\r\n\r\n");
  CHECK_THAT(other, StartsWith("HTTP/1.1 503"));
  CHECK_THAT(other, Contains("Retry-After: 1"));
  // An idle connection on a reserved slot is closed at its deadline...
  REQUIRE(eventually([&] { return s.server.connections() == 3; }));
  client idle{s.server.port()};
  CHECK(idle.closed_within(6s)); // ordinary slots wait 10 s
  // ... and beyond the reserve too, the fast 503.
  REQUIRE(eventually([&] { return s.server.connections() == 3; }));
  // One at a time: a connection not yet read from is idle, and would give
  // its slot to the next.
  client r1{s.server.port()};
  r1.send("GET /live");
  REQUIRE(eventually([&] {
    return s.server.connections() == 4 && s.server.idle_connections() == 0;
  }));
  client r2{s.server.port()};
  r2.send("GET /live");
  REQUIRE(eventually([&] {
    return s.server.connections() == 5 && s.server.idle_connections() == 0;
  }));
  client over{s.server.port()};
  CHECK_THAT(over.read_all(5s), StartsWith("HTTP/1.1 503"));
}

TEST_CASE("beyond max connections, the connection idle longest gives its "
          "slot to a new one") {
  http_limits lim;
  lim.max_connections = 3;
  served s{lim};
  std::vector<std::unique_ptr<client>> held;
  for (int i = 0; i < 3; ++i) {
    held.push_back(std::make_unique<client>(s.server.port()));
    held.back()->send("GET /" + std::to_string(i) + " HTTP/1.1\r\n\r\n");
    REQUIRE_THAT(held.back()->read_response(), StartsWith("HTTP/1.1 200"));
  }
  // A request in progress is never evicted: the second's header is half sent.
  held[1]->send("GET /half");
  REQUIRE(eventually([&] { return s.server.idle_connections() == 2; }));
  auto fresh = roundtrip(s.server.port(), "GET /fresh HTTP/1.1\r\n\r\n");
  CHECK_THAT(fresh, StartsWith("HTTP/1.1 200"));
  CHECK(held[0]->closed_within(5s)); // the oldest idle one
  // Full again (the fresh one has gone): a newer idle connection.
  REQUIRE(eventually([&] { return s.server.connections() == 2; }));
  client newer{s.server.port()};
  newer.send("GET /newer HTTP/1.1\r\n\r\n");
  REQUIRE_THAT(newer.read_response(), StartsWith("HTTP/1.1 200"));
  REQUIRE(eventually([&] { return s.server.idle_connections() == 2; }));
  // The next takes the third's slot (idle longest), never the half-sent
  // second's nor the newer one's.
  CHECK_THAT(roundtrip(s.server.port(), "GET /again HTTP/1.1\r\n\r\n"),
             StartsWith("HTTP/1.1 200"));
  CHECK(held[2]->closed_within(5s));
  CHECK_FALSE(newer.closed_within(100ms));
  held[1]->send(" HTTP/1.1\r\n\r\n");
  CHECK_THAT(held[1]->read_response(), Contains("GET /half"));
}

TEST_CASE("a client that goes away marks its exchange gone") {
  std::mutex mtx;
  std::shared_ptr<http_exchange> held;
  http_server server{
    "test", http_server::async_handler{[&](std::shared_ptr<http_exchange> ex) {
      std::lock_guard<std::mutex> g{mtx};
      held = std::move(ex);
    }}};
  REQUIRE_FALSE(server.start("127.0.0.1", 0));
  {
    client c{server.port()};
    c.send("GET /long HTTP/1.1\r\n\r\n");
    REQUIRE(eventually([&] {
      std::lock_guard<std::mutex> g{mtx};
      return held != nullptr;
    }));
    std::lock_guard<std::mutex> g{mtx};
    CHECK_FALSE(held->gone());
  }
  CHECK(eventually([&] {
    std::lock_guard<std::mutex> g{mtx};
    return held->gone();
  }));
  std::lock_guard<std::mutex> g{mtx};
  CHECK_FALSE(held->send("late"));
  held.reset();
}

TEST_CASE("a streamed answer is chunked and a reader that stops is cut off") {
  std::atomic<bool> cut{false};
  std::atomic<int> sent{0};
  http_limits lim;
  lim.max_queued_bytes = 256 << 10;
  lim.send_timeout = 2s;
  std::thread worker;
  http_server server{
    "test", http_server::async_handler{[&](std::shared_ptr<http_exchange> ex) {
      worker = std::thread([ex, &cut, &sent] {
        ex->begin_stream(200, "text/event-stream");
        std::string event = "data: " + std::string(1000, 'x') + "\n\n";
        bool small = ex->request().path == "/small";
        for (int i = 0; i < (small ? 3 : 100000); ++i) {
          if (!ex->send(event)) {
            cut = true;
            return;
          }
          ++sent;
        }
        ex->end();
      });
    }},
    lim};
  REQUIRE_FALSE(server.start("127.0.0.1", 0));
  {
    client c{server.port()};
    c.send("GET /small HTTP/1.1\r\n\r\n");
    auto out = c.read_until([](const std::string& t) {
      return t.find("\r\n0\r\n\r\n") != std::string::npos;
    });
    CHECK_THAT(out, Contains("Transfer-Encoding: chunked"));
    CHECK(count_of(out, "data: ") == 3);
    worker.join();
  }
  client stalled{server.port()};
  stalled.send("GET /big HTTP/1.1\r\n\r\n"); // and never reads
  CHECK(eventually([&] { return cut.load(); }, 15s));
  CHECK(sent.load() < 100000);
  worker.join();
}

TEST_CASE("the status server routes probes and metrics") {
  auto health = std::make_shared<health_state>("sidecar");
  metrics_registry reg;
  status_server status{health, reg};
  auto get = [&](const std::string& method, const std::string& path) {
    http_request r;
    r.method = method;
    r.path = path;
    return status.handle(r);
  };
  CHECK(get("GET", "/live").status == 200);
  CHECK(get("GET", "/ready").status == 503);
  health->set_component("engine", "serving");
  health->set_ready(true);
  CHECK(get("GET", "/ready").status == 200);
  auto h = get("GET", "/health");
  CHECK(h.status == 200);
  CHECK_THAT(h.body, Contains("\"engine\":{\"state\":\"serving\"}"));
  CHECK_THAT(h.body, Contains("\"status\":\"ready\""));
  health->begin_shutdown();
  health->set_ready(true); // too late: shutdown wins
  CHECK(get("GET", "/ready").status == 503);
  CHECK(get("GET", "/live").status == 200);
  CHECK_THAT(get("GET", "/health").body, Contains("shutting_down"));
  CHECK_THAT(get("GET", "/metrics").body,
             Contains("outrider_status_requests_total"));
  CHECK(get("GET", "/nope").status == 404);
  auto post = get("POST", "/ready");
  CHECK(post.status == 405);
  CHECK(post.headers["Allow"] == "GET, HEAD");
}
