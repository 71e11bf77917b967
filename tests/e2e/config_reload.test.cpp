// Settings reloaded on SIGHUP (--config): a changed weight changes the
// router's decisions and shows on its status page, with the same process;
// a broken file changes nothing and says why in one line; a setting read
// only at start is named as needing a restart; flow control's band cap and
// time limit, and the disaggregation policy's thresholds, change live.

#include <csignal>
#include <fstream>

#include "sim/engine_core.hpp"
#include "tests/e2e/disagg_cluster.hpp"
#include "tests/e2e/router_cluster.hpp"

using namespace outrider::test;
using json = nlohmann::json;

namespace {

json status_of(const cluster& c) {
  std::string body;
  if (http_get(c.router_status, "/debug/status", &body) != 200)
    return {};
  return json::parse(body, nullptr, false);
}

// The worker of the router's latest decision.
std::string last_worker(const cluster& c) {
  auto doc = status_of(c);
  std::string worker;
  int64_t at = -1;
  for (const auto& d : doc["decisions"])
    if (d["at_ms"].get<int64_t>() >= at) {
      at = d["at_ms"].get<int64_t>();
      worker = d["worker"].get<std::string>();
    }
  return worker;
}

double setting(const cluster& c, const char* name) {
  auto doc = status_of(c);
  return doc["settings"][name].is_number() ? doc["settings"][name].get<double>()
                                           : -1;
}

} // namespace

TEST_CASE("SIGHUP: a changed weight changes decisions, a broken file "
          "changes nothing and says why once") {
  temp_dir dir;
  auto file = dir.str() + "/router.yaml";
  std::ofstream(file) << "kv-decode-weight: 0.01\n";
  cluster c{
    2, {.num_blocks = 4096, .extra = {"--speedup", "1"}}, {"--config", file}};
  auto pid = c.router->pid();
  CHECK(setting(c, "kv_decode_weight") == Approx(0.01));
  // Worker 0 caches a prefix, then holds a long request's decode blocks.
  auto prefix = tokens(1000, 64); // 16 blocks of 4
  warm(*c.sims[0], prefix);
  REQUIRE(eventually(
    [&] { return c.router_metric("outrider_router_index_entries") >= 16; },
    10s));
  auto long_prompt = concat(prefix, tokens(20000, 800)); // 216 blocks
  child_process hold{
    {"/usr/bin/curl", "-s", "-N", "-o", "/dev/null", "-H",
     "Content-Type: application/json", "--data-binary",
     json{{"prompt", long_prompt}, {"max_tokens", 4000}, {"stream", true}}
       .dump(),
     "http://127.0.0.1:" + std::to_string(c.http_port) + "/v1/completions"}};
  bool held = eventually([&] { return c.sims[0]->running() == 1; }, 20s);
  INFO("curl: " << hold.output() << " running " << c.sims[0]->running() << "/"
                << c.sims[1]->running() << " status " << status_of(c).dump());
  REQUIRE(held);
  REQUIRE(last_worker(c) == "worker-0");
  // Decoding as the router sees it: the held request's prefill tokens are
  // released at its first token. Running on the engine is not enough:
  // asked 23 ms after the placement, its 800 queued prefill tokens still
  // counted and sent the next request to worker 1 (every run on a fast
  // machine).
  auto prefill_of = [&](const std::string& id) {
    auto doc = status_of(c);
    for (const auto& w : doc["workers"])
      if (w["id"] == id)
        return w["ranks"][0]["active_prefill_tokens"].get<int64_t>();
    return int64_t{-1};
  };
  REQUIRE(eventually([&] { return prefill_of("worker-0") == 0; }, 20s));
  // Decode blocks barely count: the cached prefix wins, on worker 0.
  auto ask = [&](uint32_t first) {
    auto r = c.complete(concat(prefix, tokens(first, 8)), 2);
    REQUIRE(r["choices"].size() == 1);
    return last_worker(c);
  };
  CHECK(ask(7000) == "worker-0");
  // Decode blocks now weigh as much as prefill: worker 0's held blocks
  // outweigh its cached prefix, and the idle worker 1 wins.
  std::ofstream(file) << "kv-decode-weight: 1.0\n";
  c.router->signal(SIGHUP);
  REQUIRE(eventually(
    [&] { return setting(c, "kv_decode_weight") == Approx(1.0); }, 10s));
  // Counted once the hook returned (the actor may have the weight before).
  CHECK(eventually(
    [&] {
      return c.router_metric(
               R"(outrider_config_reloads_total{outcome="applied"})") == 1;
    },
    10s));
  CHECK(ask(7100) == "worker-1");
  // A broken file: nothing changes, one line says why, counted.
  std::ofstream(file) << "kv-decode-weight: [not a number\n";
  c.router->signal(SIGHUP);
  REQUIRE(eventually(
    [&] {
      return c.router_metric(
               R"(outrider_config_reloads_total{outcome="refused"})") == 1;
    },
    10s));
  CHECK(setting(c, "kv_decode_weight") == Approx(1.0));
  auto log = c.router->output();
  auto line = log.find("SIGHUP: reload refused, nothing changed:");
  CHECK(line != std::string::npos);
  CHECK(log.find("SIGHUP: reload refused", line + 1) == std::string::npos);
  CHECK(ask(7200) == "worker-1");
  // A value read only at start: named, not applied; the weight still is.
  std::ofstream(file) << "kv-decode-weight: 0.01\nmigration-limit: 7\n";
  c.router->signal(SIGHUP);
  REQUIRE(eventually(
    [&] { return setting(c, "kv_decode_weight") == Approx(0.01); }, 10s));
  CHECK(eventually(
    [&] {
      return c.router->output().find("restart to apply): migration-limit") !=
             std::string::npos;
    },
    5s));
  // Worker 1 now caches the prefix too (the requests above): a prompt
  // further into the long one, which only worker 0 holds.
  auto r =
    c.complete(concat(concat(prefix, tokens(20000, 64)), tokens(7300, 8)), 2);
  REQUIRE(r["choices"].size() == 1);
  CHECK(last_worker(c) == "worker-0");
  // The same process all along.
  CHECK(c.router->pid() == pid);
  CHECK_FALSE(c.router->wait(0ms));
}

namespace {

// A completion sent by curl in the background; its output is the HTTP
// status.
std::unique_ptr<child_process> post_later(const temp_dir& dir, uint16_t port,
                                          const std::vector<uint32_t>& prompt,
                                          int max_tokens) {
  static int next = 0;
  auto file = dir.str() + "/body-" + std::to_string(next++) + ".json";
  std::ofstream(file)
    << json{{"prompt", prompt}, {"max_tokens", max_tokens}}.dump();
  return std::make_unique<child_process>(std::vector<std::string>{
    "/usr/bin/curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-H",
    "Content-Type: application/json", "--data-binary", "@" + file,
    "http://127.0.0.1:" + std::to_string(port) + "/v1/completions"});
}

} // namespace

TEST_CASE("SIGHUP: a lowered flow band cap holds for the next request to "
          "wait in line, and those waiting keep their place") {
  temp_dir dir;
  auto file = dir.str() + "/router.yaml";
  std::ofstream(file) << "flow-band-cap: 8\nqueue-timeout: 60s\n";
  // A slow engine; any queued prompt token makes its one rank busy.
  cluster c{1,
            {.num_blocks = 16384, .extra = {"--speedup", "0.25"}},
            {"--config", file, "--router-queue-threshold", "1"}};
  auto depth = [&] { return c.router_metric("outrider_router_queue_depth"); };
  CHECK(status_of(c)["flow"]["band_cap"] == 8);
  auto busy = post_later(dir, c.http_port, tokens(1, 30000), 1);
  REQUIRE(eventually([&] { return c.sims[0]->running() == 1; }, 10s));
  // The head of band 0's line and one waiting behind it (cap 8: room).
  auto head = post_later(dir, c.http_port, tokens(3000, 2000), 1);
  REQUIRE(eventually([&] { return depth() == 1; }, 10s));
  auto waiting = post_later(dir, c.http_port, tokens(6000, 2000), 1);
  REQUIRE(eventually([&] { return depth() == 2; }, 10s));
  // The cap goes to 1, the time limit to 45 s.
  std::ofstream(file) << "flow-band-cap: 1\nqueue-timeout: 45s\n";
  c.router->signal(SIGHUP);
  REQUIRE(eventually(
    [&] {
      auto flow = status_of(c)["flow"];
      return flow["band_cap"] == 1 && flow["queue_timeout_ms"] == 45000;
    },
    10s));
  // One waits in band 0 already: the next is shed at once (with cap 8 it
  // would have waited).
  auto shed = post_later(dir, c.http_port, tokens(9000, 2000), 1);
  REQUIRE(shed->wait(30s) == 0);
  CHECK(shed->output() == "429");
  CHECK(c.router_metric(R"(outrider_router_shed_total{reason="saturated",)"
                        R"(flow="default"})") == 1);
  // Those already waiting were not shed for it.
  for (auto* p : {busy.get(), head.get(), waiting.get()}) {
    REQUIRE(p->wait(90s) == 0);
    CHECK(p->output() == "200");
  }
  CHECK(c.router->output().find("restart to apply") == std::string::npos);
}

TEST_CASE("SIGHUP: new disaggregation thresholds change the next "
          "decisions, with the same process") {
  temp_dir dir;
  auto file = dir.str() + "/router.yaml";
  // Nothing is below a ratio of 0: every request is prefilled remotely.
  std::ofstream(file) << "router-conditional-disagg-config: "
                         "'{\"policy\":\"isl_bounding\",\"eff_isl_threshold\":"
                         "100000,\"eff_isl_ratio_threshold\":0}'\n";
  disagg_cluster c{"", "100", {}, {}, {"--config", file}};
  auto pid = c.router->pid();
  auto prompt = tokens(600, 200);
  CHECK(c.complete(prompt, 6) == outrider::sim::continuation(prompt, 6));
  CHECK(c.metric(decisions + "{outcome=\"remote_prefill\"}") == 1);
  REQUIRE(eventually(
    [&] { return c.metric("outrider_router_index_entries") >= 100; }, 10s));
  // The decode worker holds the prefix now, and still: remote.
  auto more = concat(prompt, tokens(9000, 8));
  CHECK(c.complete(more, 6) == outrider::sim::continuation(more, 6));
  CHECK(c.metric(decisions + "{outcome=\"remote_prefill\"}") == 2);
  // A ratio of 1: what the decode worker mostly holds is prefilled there.
  std::ofstream(file) << "router-conditional-disagg-config: "
                         "'{\"policy\":\"isl_bounding\",\"eff_isl_threshold\":"
                         "100000,\"eff_isl_ratio_threshold\":1}'\n";
  c.router->signal(SIGHUP);
  REQUIRE(eventually(
    [&] {
      std::string body;
      if (http_get(c.status, "/debug/status", &body) != 200)
        return false;
      auto doc = json::parse(body, nullptr, false);
      return doc.is_object() && doc["disagg"]["eff_isl_ratio_threshold"] == 1.0;
    },
    10s));
  auto again = concat(prompt, tokens(9100, 8));
  CHECK(c.complete(again, 6) == outrider::sim::continuation(again, 6));
  CHECK(c.metric(decisions + "{outcome=\"local_prefill\"}") == 1);
  CHECK(c.metric(decisions + "{outcome=\"remote_prefill\"}") == 2);
  CHECK(c.router->pid() == pid);
}
