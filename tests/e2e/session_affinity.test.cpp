// Session affinity (--session-affinity): the turns of a session (the same
// x-session-id) go back to the worker of the last one; soft lets the
// session go when that worker is much costlier, hard does not.

#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "tests/e2e/nats_server.hpp"
#include "tests/e2e/router_cluster.hpp"

using namespace outrider::test;
using json = nlohmann::json;

namespace {

double placed_on(cluster& c, int worker) {
  return c.router_metric("outrider_router_placed_total{worker=\"worker-" +
                         std::to_string(worker) + "\",rank=\"0\"}");
}

// One completion with a session header; which worker placed it (by the
// router's own count), or -1.
int turn(cluster& c, temp_dir& dir, const std::string& session,
         const std::vector<uint32_t>& prompt) {
  double before[2] = {placed_on(c, 0), placed_on(c, 1)};
  static int n = 0;
  auto file = dir.str() + "/turn" + std::to_string(n++) + ".json";
  std::ofstream(file) << json{{"prompt", prompt}, {"max_tokens", 1}}.dump();
  child_process curl{
    {"/usr/bin/curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-H",
     "Content-Type: application/json", "-H", "x-session-id: " + session,
     "--data-binary", "@" + file,
     "http://127.0.0.1:" + std::to_string(c.http_port) + "/v1/completions"}};
  curl.wait(60s);
  if (curl.output() != "200")
    return -1;
  for (int w = 0; w < 2; ++w)
    if (placed_on(c, w) > before[w])
      return w;
  return -1;
}

// Requests placed on `worker` by the routers on `statuses`, summed.
double placed_by(const std::vector<uint16_t>& statuses, int worker) {
  double n = 0;
  for (auto st : statuses)
    n += metric_value(st, "outrider_router_placed_total{worker=\"worker-" +
                            std::to_string(worker) + "\",rank=\"0\"}");
  return n;
}

// One turn sent to the router on `http`; which worker took it (by the
// routers' own counts), or -1.
int turn_on(uint16_t http, const std::vector<uint16_t>& statuses, temp_dir& dir,
            const std::string& session, const std::vector<uint32_t>& prompt) {
  double before[2] = {placed_by(statuses, 0), placed_by(statuses, 1)};
  static int n = 0;
  auto file = dir.str() + "/shared" + std::to_string(n++) + ".json";
  std::ofstream(file) << json{{"prompt", prompt}, {"max_tokens", 1}}.dump();
  child_process curl{
    {"/usr/bin/curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-H",
     "Content-Type: application/json", "-H", "x-session-id: " + session,
     "--data-binary", "@" + file,
     "http://127.0.0.1:" + std::to_string(http) + "/v1/completions"}};
  curl.wait(60s);
  if (curl.output() != "200")
    return -1;
  for (int w = 0; w < 2; ++w)
    if (placed_by(statuses, w) > before[w])
      return w;
  return -1;
}

} // namespace

TEST_CASE("session affinity: a session's turns stay on one worker though "
          "their prompts share nothing, whichever session") {
  cluster c{2, {}, {"--session-affinity", "hard"}};
  temp_dir dir;
  std::map<std::string, std::set<int>> workers_of;
  for (uint32_t t = 0; t < 6; ++t)
    for (const std::string s : {"alice", "bob", "carol"})
      workers_of[s].insert(
        turn(c, dir, s, tokens(1 + 997 * (t * 3 + s.size()), 48)));
  for (const auto& [s, ws] : workers_of) {
    INFO(s);
    CHECK(ws.size() == 1);
    CHECK_FALSE(ws.count(-1));
  }
  CHECK(c.router_metric(
          "outrider_router_session_decisions_total{outcome=\"kept\"}") == 15);
  CHECK(c.router_metric(
          "outrider_router_session_decisions_total{outcome=\"new\"}") == 3);
}

TEST_CASE("session affinity: soft lets a session leave a worker loaded with "
          "a long prompt, hard keeps it there") {
  for (const std::string mode : {"soft", "hard"}) {
    INFO(mode);
    cluster c{2,
              {.num_blocks = 16384, .extra = {"--speedup", "0.25"}},
              {"--session-affinity", mode}};
    temp_dir dir;
    int home = turn(c, dir, "s1", tokens(100, 48));
    REQUIRE(home >= 0);
    // A long prompt whose prefix only `home` caches goes there and keeps
    // it busy for seconds.
    auto prefix = tokens(20000, 64);
    warm(*c.sims[static_cast<size_t>(home)], prefix);
    REQUIRE(eventually(
      [&] { return c.router_metric("outrider_router_index_entries") >= 4; },
      10s));
    auto file = dir.str() + "/heavy.json";
    std::ofstream(file) << json{
      {"prompt", concat(prefix, tokens(1, 28000))},
      {"max_tokens", 1}}.dump();
    double before = placed_on(c, home);
    std::thread heavy{[&] {
      child_process curl{{"/usr/bin/curl", "-s", "-o", "/dev/null", "-H",
                          "Content-Type: application/json", "--data-binary",
                          "@" + file,
                          "http://127.0.0.1:" + std::to_string(c.http_port) +
                            "/v1/completions"}};
      curl.wait(60s);
    }};
    bool loaded = eventually([&] { return placed_on(c, home) > before; }, 10s);
    int next = turn(c, dir, "s1", tokens(5000, 48));
    heavy.join();
    REQUIRE(loaded);
    if (mode == "hard") {
      CHECK(next == home);
    } else {
      CHECK(next == 1 - home);
      CHECK(c.router_metric(
              "outrider_router_session_decisions_total{outcome=\"moved\"}") ==
            1);
      // It stays where it moved.
      CHECK(turn(c, dir, "s1", tokens(6000, 48)) == 1 - home);
    }
  }
}

TEST_CASE("session affinity shared by router replicas (--share-bookings): "
          "turns alternating between replicas stay on one worker, and soft "
          "lets go of a worker another replica loaded") {
  nats_server nats;
  auto flags = fleet_flags(nats);
  flags.insert(flags.end(), {"--share-bookings", "--session-affinity", "soft"});
  cluster c{2,
            {.num_blocks = 16384, .extra = {"--speedup", "0.25"}},
            flags,
            fleet_flags(nats)};
  extra_router peer{flags};
  REQUIRE(eventually(
    [&] { return metric_value(peer.status, "outrider_router_workers") == 2; },
    15s));
  std::vector<uint16_t> statuses{c.router_status, peer.status};
  std::vector<uint16_t> https{c.http_port, peer.http};
  temp_dir dir;
  // Both replicas hold no booking (the last turn's release has reached
  // the other one too): soft mode then weighs equal loads, and only the
  // shared session memory decides.
  auto idle = [&] {
    for (auto st : statuses)
      for (int w = 0; w < 2; ++w)
        if (metric_value(st, "outrider_router_active_decode_blocks{worker="
                             "\"worker-" +
                               std::to_string(w) + "\",rank=\"0\"}") > 0)
          return false;
    return true;
  };
  std::map<std::string, std::set<int>> workers_of;
  for (uint32_t t = 0; t < 6; ++t)
    for (const std::string s : {"alice", "bob"}) {
      REQUIRE(eventually(idle, 10s));
      // A prompt of its own per turn and session (none another worker
      // caches: soft mode would rightly follow a cached prefix).
      uint32_t idx = s == "alice" ? 0 : 1;
      workers_of[s].insert(turn_on(https[(t + idx) % 2], statuses, dir, s,
                                   tokens(1 + 997 * (t * 2 + idx), 48)));
    }
  for (const auto& [s, ws] : workers_of) {
    INFO(s);
    CHECK(ws.size() == 1);
    CHECK_FALSE(ws.count(-1));
  }
  // The peer kept, on its own, turns the first router placed (and back).
  CHECK(metric_value(peer.status,
                     "outrider_router_session_decisions_total{outcome="
                     "\"kept\"}") >= 4);
  // Soft: the first router loads alice's worker with a long prompt (only
  // that worker caches its prefix); the peer, counting that booking,
  // moves alice's next turn away.
  int home = *workers_of["alice"].begin();
  REQUIRE(home >= 0);
  auto prefix = tokens(20000, 64);
  warm(*c.sims[static_cast<size_t>(home)], prefix);
  REQUIRE(eventually(
    [&] { return c.router_metric("outrider_router_index_entries") >= 16; },
    10s));
  auto file = dir.str() + "/heavy.json";
  std::ofstream(file) << json{
    {"prompt", concat(prefix, tokens(1, 28000))},
    {"max_tokens", 1}}.dump();
  double before = placed_by({c.router_status}, home);
  std::thread heavy{[&] {
    child_process curl{
      {"/usr/bin/curl", "-s", "-o", "/dev/null", "-H",
       "Content-Type: application/json", "--data-binary", "@" + file,
       "http://127.0.0.1:" + std::to_string(c.http_port) + "/v1/completions"}};
    curl.wait(60s);
  }};
  bool loaded = eventually(
    [&] { return placed_by({c.router_status}, home) > before; }, 10s);
  // The peer has heard of the booking once its load shows there.
  bool heard = eventually(
    [&] {
      return metric_value(peer.status,
                          "outrider_router_active_prefill_tokens{worker="
                          "\"worker-" +
                            std::to_string(home) + "\",rank=\"0\"}") > 1000;
    },
    10s);
  int next = turn_on(peer.http, statuses, dir, "alice", tokens(5000, 48));
  heavy.join();
  REQUIRE(loaded);
  REQUIRE(heard);
  CHECK(next == 1 - home);
  CHECK(metric_value(peer.status,
                     "outrider_router_session_decisions_total{outcome="
                     "\"moved\"}") == 1);
}
