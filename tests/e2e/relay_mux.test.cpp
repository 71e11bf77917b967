// `--dispatch mux`: every request a router relays through one sidecar rides
// one multiplexed stream (proto/relay_mux.proto). Many streams at once keep
// every token; a relay that stops answering holds nothing past its
// deadline; a relay refuses what a router must not send; relays without the
// mux get Generate streams (fleet.test.cpp); a relay told to stop refuses
// new requests and says it drains. Cancellation, an engine's and a
// sidecar's death are covered beside the per-request relay
// (router.test.cpp, sglang_router.test.cpp).

#include <atomic>
#include <csignal>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "relay_mux.grpc.pb.h"
#include "sim/engine_core.hpp"
#include "tests/e2e/raw_mux.hpp"
#include "tests/e2e/router_cluster.hpp"
#include "tests/sse_load.hpp"

using namespace outrider;
using namespace outrider::test;
using json = nlohmann::json;

namespace {

std::vector<uint32_t> prompt_of(size_t i) {
  return tokens(static_cast<uint32_t>(1 + 64 * i), 16);
}

// Requests running on the first engine now (-1: no answer).
int running(const cluster& c) {
  std::string body;
  if (http_get(c.sims[0]->debug, "/debug/load?rank=0", &body) != 200)
    return -1;
  return json::parse(body)["running"].get<int>();
}

double sidecar_metric(const cluster& c, size_t i, const std::string& series) {
  return c.sides[i]->metric(series).value_or(-1);
}

} // namespace

TEST_CASE("mux dispatch: 96 concurrent streams through two relays ride one "
          "stream per relay, every token as the engine made it") {
  sim_process::options so;
  so.extra = {"--speedup", "20", "--max-num-seqs", "256"};
  cluster c{2, so, {"--dispatch", "mux"}};
  sse_load_config cfg;
  cfg.port = c.http_port;
  cfg.streams = 96;
  cfg.record_token_ids = true;
  cfg.body = [](size_t i) {
    return json{{"prompt", prompt_of(i)}, {"max_tokens", 24}, {"stream", true}}
      .dump();
  };
  auto results = run_sse_load(cfg);
  REQUIRE(results.size() == 96);
  size_t exact = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    INFO("stream " << i << ": " << results[i].last_line);
    CHECK(results[i].done);
    exact += results[i].token_ids == sim::continuation(prompt_of(i), 24);
  }
  CHECK(exact == 96);
  // Each relay served its share on one stream from this router, which
  // stays open for the next requests.
  double served = 0, streams = 0;
  for (size_t i = 0; i < c.sides.size(); ++i) {
    auto ok =
      sidecar_metric(c, i, "outrider_relay_requests_total{outcome=\"ok\"}");
    auto open = sidecar_metric(c, i, "outrider_relay_mux_streams");
    INFO("sidecar " << i << ": " << ok << " ok, " << open << " mux streams");
    CHECK(open == (ok > 0 ? 1.0 : 0.0));
    served += ok;
    streams += open;
  }
  CHECK(served == 96);
  CHECK(streams >= 1);
  CHECK(eventually(
    [&] { return c.router_metric("outrider_router_requests_in_flight") == 0; },
    5s));
}

TEST_CASE("mux dispatch: a relay that stops answering without breaking its "
          "connection holds no request past its deadline") {
  cluster c{1,
            {.extra = {"--speedup", "1"}},
            {"--dispatch", "mux", "--request-timeout", "3s"}};
  // Its connections stay open.
  signal_after_first_token stop{c, *c.sides[0]->proc, SIGSTOP};
  auto t0 = std::chrono::steady_clock::now();
  auto [code, body] =
    http(c.http_port, "POST", "/v1/completions",
         json{{"prompt", tokens(500, 8)}, {"max_tokens", 900}, {"stream", true}}
           .dump());
  auto took = std::chrono::steady_clock::now() - t0;
  bool stopped = stop.join();
  c.sides[0]->proc->signal(SIGCONT);
  REQUIRE(stopped);
  INFO(body.substr(body.size() > 600 ? body.size() - 600 : 0));
  // 900 tokens at model speed take far longer than 3 s: the router ended
  // it at its deadline (checked once a second), not the stopped relay.
  CHECK(took < allowed(15s));
  // An error event ends it (then [DONE]), before the 900 tokens.
  CHECK(body.find("\"error\"") != std::string::npos);
  auto [toks, done] = read_sse(body);
  CHECK(toks.size() < 900);
}

TEST_CASE("a relay's mux refuses what a router must not send (another "
          "worker's name, an id already open), ignores unknown cancels, and "
          "a router that leaves cancels every request on the engine") {
  cluster c{1, {.extra = {"--speedup", "1"}}};
  auto endpoint = c.sides[0]->relay_endpoint();
  SECTION("a stream naming another worker ends before any request") {
    raw_mux m{endpoint, "worker-9"};
    // The write may already find the stream ended (the relay refuses it at
    // once): its result is not the point; the stream's end is.
    m.open(1, tokens(100, 8), 4);
    mx::MuxResponse r;
    CHECK_FALSE(m.rw->Read(&r));
    auto st = m.rw->Finish();
    CHECK(st.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
    CHECK(sidecar_metric(c, 0, "outrider_relay_misaddressed_total") == 1);
  }
  SECTION("an id already open is refused and its request runs on, "
          "cancellable by that id; an unknown cancel changes nothing") {
    raw_mux m{endpoint, "worker-0"};
    CHECK(m.open(7, tokens(100, 8), 900));
    CHECK(m.open(7, tokens(900, 8), 6));
    auto [first, refused] = m.until_done(7);
    CHECK(refused == static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
    CHECK(m.cancel(12345));
    REQUIRE(eventually([&] { return running(c) == 1; }, 20s));
    CHECK(m.cancel(7)); // still the first request's id
    auto [rest, cancelled] = m.until_done(7);
    CHECK(cancelled == static_cast<int>(grpc::StatusCode::CANCELLED));
    CHECK(eventually([&] { return running(c) == 0; }, 20s));
    CHECK(m.open(8, tokens(100, 8), 6));
    auto [toks, code] = m.until_done(8);
    CHECK(code == 0);
    CHECK(toks == sim::continuation(tokens(100, 8), 6));
    m.rw->WritesDone();
    CHECK(m.rw->Finish().ok());
  }
  SECTION("a router that closes its side or cancels a request: the engine "
          "stops it") {
    raw_mux m{endpoint, "worker-0"};
    CHECK(m.open(1, tokens(100, 8), 900));
    CHECK(m.open(2, tokens(300, 8), 900));
    REQUIRE(eventually([&] { return running(c) == 2; }, 20s));
    CHECK(m.cancel(1));
    auto [some, code] = m.until_done(1);
    CHECK(code == static_cast<int>(grpc::StatusCode::CANCELLED));
    CHECK(eventually([&] { return running(c) == 1; }, 20s));
    m.rw->WritesDone(); // the router leaves: request 2 is cancelled too
    CHECK(eventually([&] { return running(c) == 0; }, 20s));
    auto [rest, code2] = m.until_done(2);
    CHECK(code2 == static_cast<int>(grpc::StatusCode::CANCELLED));
    CHECK(m.rw->Finish().ok());
    CHECK(sidecar_metric(c, 0, "outrider_relay_mux_streams") == 0);
  }
}

TEST_CASE("a relay told to stop drains its mux streams: a request opened "
          "after is refused at once (UNAVAILABLE), one running goes on "
          "within --relay-grace, and every message says it drains") {
  cluster c{1,
            {.num_blocks = 1024, .extra = {"--speedup", "1"}},
            {},
            {"--relay-grace", "10s", "--shutdown-timeout", "30s"}};
  raw_mux m{c.sides[0]->relay_endpoint(), "worker-0"};
  // About 23 s of tokens at model speed: it outlasts the sidecar's way to
  // its relay's stop however slow the machine (it must not end first).
  CHECK(m.open(1, tokens(100, 8), 4000));
  REQUIRE(eventually([&] { return running(c) == 1; }, 20s));
  // Request 1 is streaming; no message says the relay drains yet.
  mx::MuxResponse r;
  REQUIRE(m.rw->Read(&r));
  CHECK_FALSE(r.draining());
  c.sides[0]->proc->signal(SIGTERM);
  // Reads until a message says it drains (request 1's tokens keep coming).
  bool told = false;
  while (!told && m.rw->Read(&r)) {
    told = r.draining();
    for (const auto& u : r.updates())
      CHECK_FALSE(u.done()); // request 1 is not cut, and nothing else runs
  }
  REQUIRE(told);
  CHECK(m.open(2, tokens(300, 8), 6));
  // Request 2 is refused without reaching the engine; request 1 goes on,
  // and every message from now on says the relay drains.
  int refused = -1;
  std::string why;
  size_t after = 0; // request 1's tokens after request 2's refusal
  bool all_draining = true;
  while (m.rw->Read(&r) && after < 20) {
    all_draining = all_draining && r.draining();
    for (const auto& u : r.updates()) {
      if (u.id() == 2 && u.done()) {
        refused = u.code();
        why = u.message();
        CHECK(u.responses_size() == 0);
      }
      if (u.id() == 1 && refused != -1)
        for (const auto& resp : u.responses())
          after += static_cast<size_t>(resp.token().tokens_size());
      if (u.id() == 1)
        CHECK_FALSE(u.done());
    }
  }
  INFO(why);
  CHECK(refused == static_cast<int>(grpc::StatusCode::UNAVAILABLE));
  CHECK(why.find("shutting down") != std::string::npos);
  CHECK(after >= 20);
  CHECK(all_draining);
  m.ctx.TryCancel();
  m.rw->Finish();
}

// (A name whose first ": " comes late wraps badly in Catch 2.13's console
// reporter: its indent is taken from there; one such name aborted it.)
TEST_CASE("relay stream limit: one bound (relay-max-streams) on engine calls "
          "across a relay's mux streams and Generate calls, RESOURCE_EXHAUSTED "
          "beyond it at once, room again as one ends") {
  cluster c{1,
            {.num_blocks = 1024, .extra = {"--speedup", "1"}},
            {},
            {"--relay-max-streams", "2"}};
  auto endpoint = c.sides[0]->relay_endpoint();
  raw_mux m{endpoint, "worker-0"};
  // About 23 s each at model speed: both still run through every check.
  CHECK(m.open(1, tokens(100, 8), 4000));
  CHECK(m.open(2, tokens(300, 8), 4000));
  REQUIRE(eventually([&] { return running(c) == 2; }, 20s));
  // A third on the same stream: refused without reaching the engine.
  CHECK(m.open(3, tokens(500, 8), 6));
  auto [none, refused] = m.until_done(3);
  CHECK(refused == static_cast<int>(grpc::StatusCode::RESOURCE_EXHAUSTED));
  CHECK(none.empty());
  // The same bound holds for a Generate call beside the stream.
  CHECK(generate_on(endpoint, "worker-0").error_code() ==
        grpc::StatusCode::RESOURCE_EXHAUSTED);
  CHECK(running(c) == 2);
  CHECK(sidecar_metric(
          c, 0, R"(outrider_relay_requests_total{outcome="refused"})") == 2);
  // One ends: room for the next.
  CHECK(m.cancel(1));
  CHECK(m.until_done(1).second ==
        static_cast<int>(grpc::StatusCode::CANCELLED));
  CHECK(eventually([&] { return running(c) == 1; }, 20s));
  CHECK(m.open(4, tokens(700, 8), 6));
  auto [toks, code] = m.until_done(4);
  CHECK(code == 0);
  CHECK(toks == sim::continuation(tokens(700, 8), 6));
  m.ctx.TryCancel();
  m.rw->Finish();
}
