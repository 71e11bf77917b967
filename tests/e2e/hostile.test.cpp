// The router's HTTP edge tried as an attacker would, against the real
// binaries: every answer is a clear status, the process lives, its threads
// and memory stay bounded, and abandoned requests stop on the engine.

#include <atomic>
#include <csignal>
#include <fstream>
#include <sys/resource.h>
#include <thread>

#include "tests/e2e/router_cluster.hpp"
#include "tests/raw_client.hpp"

using namespace outrider::test;
using namespace std::string_literals;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using json = nlohmann::json;

namespace {

std::string post(const std::string& body, const std::string& extra = {}) {
  return "POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + extra +
         "Content-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

// One request on its own connection: the whole response.
std::string ask(uint16_t port, const std::string& bytes) {
  raw_client c{port};
  REQUIRE(c.connected());
  c.send(bytes);
  return c.read_response();
}

// Until the router has placed one request on its worker (it may still be
// learning of the worker when its frontend is already up).
void warm_up(cluster& c) {
  REQUIRE(eventually(
    [&] {
      return StartsWith("HTTP/1.1 200")
        .match(
          ask(c.http_port,
              post(json{{"prompt", tokens(1, 8)}, {"max_tokens", 1}}.dump())));
    },
    20s));
}

void check_alive(cluster& c) {
  CHECK_FALSE(c.router->wait(std::chrono::milliseconds{0}));
  CHECK(http_get(c.router_status, "/live") == 200);
  auto ok = ask(c.http_port,
                post(json{{"prompt", tokens(1, 8)}, {"max_tokens", 2}}.dump()));
  CHECK_THAT(ok, StartsWith("HTTP/1.1 200"));
}

} // namespace

TEST_CASE("hostile requests get clear errors and the router lives") {
  cluster c{
    1,
    {.extra = {"--speedup", "100"}},
    {"--max-prompt-tokens", "1000", "--http-max-body-bytes", "1048576"}};
  auto p = c.http_port;
  auto nested = [](const std::string& unit, size_t n) {
    std::string s = "{\"prompt\":";
    s.reserve(s.size() + n * unit.size());
    for (size_t i = 0; i < n; ++i)
      s += unit;
    return s;
  };
  // 100,000 nested arrays, then objects: refused before parsing.
  CHECK_THAT(ask(p, post(nested("[", 100000))), StartsWith("HTTP/1.1 400"));
  CHECK_THAT(ask(p, post(nested("{\"a\":", 100000))),
             StartsWith("HTTP/1.1 400"));
  // Invalid UTF-8 in the path, a header, the JSON; NUL bytes.
  CHECK_THAT(ask(p, "GET /\xff HTTP/1.1\r\n\r\n"), StartsWith("HTTP/1.1 400"));
  CHECK_THAT(ask(p, "GET /v1/models HTTP/1.1\r\nX-A: \xc3\x28\r\n\r\n"),
             StartsWith("HTTP/1.1 400"));
  CHECK_THAT(ask(p, post("{\"prompt\":[1],\"model\":\"\xff\xfe\"}")),
             StartsWith("HTTP/1.1 400"));
  CHECK_THAT(ask(p, post("{\"prompt\":[1]\0}"s)), StartsWith("HTTP/1.1 400"));
  CHECK_THAT(ask(p, "GET /v1/\0models HTTP/1.1\r\n\r\n"s),
             StartsWith("HTTP/1.1 400"));
  // Oversized headers, too many headers, an oversized body and prompt.
  CHECK_THAT(ask(p, "GET /v1/models HTTP/1.1\r\nX: " + std::string(20000, 'a') +
                      "\r\n\r\n"),
             StartsWith("HTTP/1.1 431"));
  std::string many;
  for (int i = 0; i < 150; ++i)
    many += "X-" + std::to_string(i) + ": 1\r\n";
  CHECK_THAT(ask(p, "GET /v1/models HTTP/1.1\r\n" + many + "\r\n"),
             StartsWith("HTTP/1.1 431"));
  CHECK_THAT(ask(p, post(std::string(2 << 20, ' '))),
             StartsWith("HTTP/1.1 413"));
  auto long_prompt =
    ask(p, post(json{{"prompt", tokens(1, 1001)}, {"max_tokens", 1}}.dump()));
  CHECK_THAT(long_prompt, StartsWith("HTTP/1.1 400"));
  CHECK_THAT(long_prompt, Contains("prompt_too_long"));
  // Two Content-Length headers.
  CHECK_THAT(ask(p, "POST /v1/completions HTTP/1.1\r\nContent-Length: 2\r\n"
                    "Content-Length: 12\r\n\r\n{}"),
             StartsWith("HTTP/1.1 400"));
  // Pipelined requests: every one answered, in order.
  raw_client piped{p};
  auto one = json{{"prompt", tokens(10, 8)}, {"max_tokens", 1}}.dump();
  auto two = json{{"prompt", tokens(20, 8)}, {"max_tokens", 3}}.dump();
  piped.send(post(one) + "GET /v1/models HTTP/1.1\r\n\r\n" + post(two));
  auto out = piped.read_until(
    [](const std::string& t) { return count_of(t, "HTTP/1.1 200") == 3; });
  CHECK(count_of(out, "HTTP/1.1 200") == 3);
  CHECK(out.find("\"completion_tokens\":1") < out.find("\"object\":\"list\""));
  CHECK(out.find("\"object\":\"list\"") < out.find("\"completion_tokens\":3"));
  check_alive(c);
  CHECK(
    c.router_metric(
      "outrider_http_refused_total{server=\"frontend\",reason=\"bad_utf8\"}") >=
    2);
}

TEST_CASE("slow sockets lock nobody out and probes stay fast") {
  raise_fd_limit();
  cluster c{1, {.extra = {"--speedup", "100"}}, {"--http-read-timeout", "3s"}};
  auto pid = c.router->pid();
  auto threads_before = proc_status(pid, "Threads");
  // 1,100 sockets that send one header byte a second.
  std::vector<std::unique_ptr<raw_client>> slow;
  for (int i = 0; i < 1100; ++i) {
    slow.push_back(std::make_unique<raw_client>(c.http_port));
    REQUIRE(slow.back()->connected());
    slow.back()->send("P");
  }
  std::atomic<bool> dripping{true};
  std::thread dripper([&] {
    for (int round = 0; round < 10 && dripping; ++round) {
      for (auto& s : slow)
        s->send("O");
      for (int i = 0; i < 50 && dripping; ++i)
        std::this_thread::sleep_for(20ms);
    }
  });
  // Meanwhile: probes and a real request, timed.
  auto worst_probe = 0ms;
  for (int i = 0; i < 20; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    CHECK(http_get(c.router_status, "/live") == 200);
    worst_probe = std::max(
      worst_probe, std::chrono::duration_cast<std::chrono::milliseconds>(
                     std::chrono::steady_clock::now() - t0));
  }
  auto t0 = std::chrono::steady_clock::now();
  auto real =
    ask(c.http_port,
        post(json{{"prompt", tokens(1, 8)}, {"max_tokens", 2}}.dump()));
  auto real_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
    std::chrono::steady_clock::now() - t0);
  CHECK_THAT(real, StartsWith("HTTP/1.1 200"));
  auto threads_during = proc_status(pid, "Threads");
  WARN("1,100 slow sockets: worst /live "
       << worst_probe.count() << " ms, a completion " << real_ms.count()
       << " ms, router threads " << threads_before << " -> " << threads_during);
  CHECK(worst_probe < 250ms); // 50 ms asked; slack for a busy 2-core CI
  CHECK(real_ms < 2000ms);
  CHECK(threads_during <= threads_before + 4);
  // The slow ones end with 408 at the read deadline, not later.
  CHECK_THAT(
    slow[0]->read_until([](const std::string& t) { return !t.empty(); }, 8s),
    StartsWith("HTTP/1.1 408"));
  dripping = false;
  dripper.join();
  // A body dripped every 2 ms gets 408 at the deadline too.
  raw_client drip{c.http_port};
  drip.send("POST /v1/completions HTTP/1.1\r\nContent-Length: 100000\r\n\r\n");
  std::string got;
  auto started = std::chrono::steady_clock::now();
  for (int i = 0; i < 3000 && got.empty(); ++i) {
    drip.send("[");
    got = drip.read_until([](const std::string& t) { return !t.empty(); }, 2ms);
  }
  CHECK_THAT(got, StartsWith("HTTP/1.1 408"));
  CHECK(std::chrono::steady_clock::now() - started < 6s);
  check_alive(c);
}

TEST_CASE("2000 concurrent keep-alive clients on a few threads") {
  raise_fd_limit();
  cluster c{1, {.extra = {"--speedup", "100"}}};
  auto pid = c.router->pid();
  auto threads_before = proc_status(pid, "Threads");
  std::vector<std::unique_ptr<raw_client>> clients;
  for (int i = 0; i < 2000; ++i) {
    clients.push_back(std::make_unique<raw_client>(c.http_port));
    REQUIRE(clients.back()->connected());
  }
  int ok = 0;
  for (int round = 0; round < 2; ++round) {
    for (auto& cl : clients)
      cl->send("GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n");
    for (auto& cl : clients)
      ok += StartsWith("HTTP/1.1 200").match(cl->read_response());
  }
  CHECK(ok == 4000);
  auto threads = proc_status(pid, "Threads");
  auto rss_mb = proc_status(pid, "VmRSS") / 1024;
  WARN("2,000 keep-alive clients: router threads "
       << threads_before << " -> " << threads << ", RSS " << rss_mb << " MB");
  CHECK(threads <= threads_before + 4);
  CHECK(rss_mb < rss_bound_mb(300));
  clients.clear();
  check_alive(c);
}

TEST_CASE(
  "a non-streaming request whose client goes away stops on the engine") {
  cluster c{1, {.extra = {"--speedup", "1"}}};
  warm_up(c);
  {
    raw_client gone{c.http_port};
    gone.send(
      post(json{{"prompt", tokens(300, 8)}, {"max_tokens", 900}}.dump()));
    REQUIRE(eventually([&] { return c.sims[0]->running() == 1; }, 10s));
  }
  CHECK(eventually([&] { return c.sims[0]->running() == 0; }, 10s));
  check_alive(c);
}

TEST_CASE("an SSE reader that stops reading is cut off and its request ends") {
  // An engine as fast as it can go, with room for a long answer.
  cluster c{1,
            {.block_size = 16, .num_blocks = 16384, .extra = {"--no-sleep"}},
            {"--http-send-timeout", "1s"}};
  warm_up(c);
  raw_client stalled{c.http_port};
  int rcvbuf = 4096;
  setsockopt(stalled.fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
  stalled.send(post(json{
    {"prompt", tokens(500, 8)},
    {"max_tokens", 120000}, // the context is 131072
    {"stream", true}}.dump()));
  // Cut off at the send deadline (or the queue bound), never reading.
  CHECK(eventually(
    [&] {
      return c.router_metric("outrider_http_refused_total{server=\"frontend\","
                             "reason=\"slow_reader\"}") >= 1;
    },
    60s));
  CHECK(eventually([&] { return c.sims[0]->running() == 0; }, 5s));
  auto rss_mb = proc_status(c.router->pid(), "VmRSS") / 1024;
  WARN("a stalled SSE reader cut off: router RSS " << rss_mb << " MB");
  CHECK(rss_mb < rss_bound_mb(300));
  check_alive(c);
}

TEST_CASE("SIGTERM stops admitting, ends requests in flight, no migration") {
  // A request far longer than the shutdown grace.
  cluster c{
    1,
    {.block_size = 16, .num_blocks = 16384, .extra = {"--speedup", "1"}},
    {"--shutdown-timeout", "3s"}};
  warm_up(c);
  raw_client streaming{c.http_port};
  streaming.send(post(json{
    {"prompt", tokens(300, 8)},
    {"max_tokens", 900},
    {"stream", true}}.dump()));
  auto first = streaming.read_until(
    [](const std::string& t) { return t.find("data: ") != std::string::npos; });
  REQUIRE_THAT(first, Contains("\"token_ids\":[")); // a token, no error
  auto t0 = std::chrono::steady_clock::now();
  c.router->signal(SIGTERM);
  // New requests are refused at once (or find the listener gone).
  CHECK(eventually(
    [&] {
      raw_client late{c.http_port};
      if (!late.connected())
        return true;
      late.send(post(json{{"prompt", tokens(1, 8)}, {"max_tokens", 1}}.dump()));
      return StartsWith("HTTP/1.1 503").match(late.read_response(2s));
    },
    2s));
  auto rest = streaming.read_until(
    [](const std::string& t) {
      return t.find("data: [DONE]") != std::string::npos;
    },
    10s);
  CHECK_THAT(rest, Contains("shutting down"));
  CHECK_THAT(rest, Contains("data: [DONE]"));
  auto code = c.router->wait(10s);
  REQUIRE(code);
  CHECK(*code == 0);
  CHECK(std::chrono::steady_clock::now() - t0 < 5s);
  CHECK(eventually([&] { return c.sims[0]->running() == 0; }, 5s));
  CHECK_THAT(c.router->output(), !Contains("migrating"));
}

TEST_CASE("a request past --request-timeout gets 504 and stops on the engine") {
  cluster c{1, {.extra = {"--speedup", "1"}}, {"--request-timeout", "700ms"}};
  warm_up(c);
  auto started = std::chrono::steady_clock::now();
  auto got =
    ask(c.http_port,
        post(json{{"prompt", tokens(1, 16)}, {"max_tokens", 900}}.dump()));
  CHECK_THAT(got, StartsWith("HTTP/1.1 504"));
  CHECK_THAT(got, Contains("request-timeout"));
  CHECK(std::chrono::steady_clock::now() - started < 5s);
  // The engine stopped generating for it.
  CHECK(eventually([&] { return c.sims[0]->running() == 0; }, 5s));
  check_alive(c);
}
