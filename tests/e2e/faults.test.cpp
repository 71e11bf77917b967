// The fault suite (scripts/faults; hidden from the default run): while a
// workload streams through the router (separate processes, relay dispatch),
// faults are injected in turn: an engine killed -9 and restarted, a sidecar
// killed -9 and restarted, the router killed -9 and restarted, an engine
// paused and resumed. After each: every stream started meanwhile either
// completed whole or failed with a clear error (an HTTP error, an error
// event, or a refused/broken connection while the router itself was
// down), none lost; the worker set is whole again; recovery times. At the
// end every sidecar's index equals its engine's cache (ground truth).
// With OUTRIDER_FAULTS_TABLE set, writes the table of faults x outcomes
// there (docs/faults.md).

#include <csignal>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/e2e/router_cluster.hpp"
#include "tests/sse_load.hpp"

using namespace outrider::test;
using json = nlohmann::json;

namespace {

constexpr uint32_t max_tokens = 24;

struct fault_row {
  std::string fault;
  double at_s = 0;       // since the workload began
  double recovery_s = 0; // after the restart or resume, until the worker
                         // set is whole and a probe completion passes
  size_t complete = 0, clear_error = 0, broken = 0, lost = 0;
};

std::string table(const std::vector<fault_row>& rows) {
  std::ostringstream os;
  os << "| fault | at (s) | recovery after restart/resume (s) | streams "
        "complete | clear errors | broken connections | lost |\n"
        "|---|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& r : rows) {
    char line[256];
    std::snprintf(line, sizeof(line),
                  "| %s | %.1f | %.2f | %zu | %zu | %zu | %zu |\n",
                  r.fault.c_str(), r.at_s, r.recovery_s, r.complete,
                  r.clear_error, r.broken, r.lost);
    os << line;
  }
  return os.str();
}

} // namespace

TEST_CASE("fault suite: kill, restart and pause each part under load",
          "[.][faults]") {
  sim_process::options so;
  so.extra = {"--speedup", "10"};
  so.num_blocks = 4096;
  cluster c{2, so};
  REQUIRE(c.complete(tokens(1, 8), 2)["choices"].size() == 1);
  using clock = std::chrono::steady_clock;
  auto t0 = clock::now();
  auto since = [&] {
    return std::chrono::duration<double>(clock::now() - t0).count();
  };
  // The workload: 8 streams at all times for the whole suite.
  std::vector<sse_stream_result> results;
  std::thread load{[&] {
    sse_load_config cfg;
    cfg.port = c.http_port;
    cfg.streams = 200000;
    cfg.concurrency = 8;
    cfg.launch_for = std::chrono::seconds{70};
    cfg.deadline = std::chrono::seconds{120};
    cfg.body = [](size_t i) {
      return json{
        {"prompt", tokens(static_cast<uint32_t>(1 + 64 * (i % 300)), 32)},
        {"max_tokens", max_tokens},
        {"stream", true}}
        .dump();
    };
    results = run_sse_load(cfg);
  }};
  auto whole = [&] {
    return c.router_metric("outrider_router_workers") >= 2 &&
           http(c.http_port, "POST", "/v1/completions",
                json{{"prompt", tokens(7, 8)}, {"max_tokens", 2}}.dump())
               .first == 200;
  };
  std::vector<fault_row> rows;
  auto inject = [&](const std::string& name, auto&& fault) {
    std::this_thread::sleep_for(5s); // steady load first
    fault_row r;
    r.fault = name;
    r.at_s = since();
    fault();
    auto start = clock::now(); // after the restart or resume
    REQUIRE(eventually(whole, 30s));
    r.recovery_s = std::chrono::duration<double>(clock::now() - start).count();
    rows.push_back(r);
  };
  inject("engine 0 killed -9, restarted", [&] {
    c.sims[0]->proc->signal(SIGKILL);
    REQUIRE(c.sims[0]->proc->wait(5s));
    c.sims[0]->start();
    REQUIRE(c.sims[0]->wait_serving(10s));
  });
  inject("sidecar 1 killed -9, restarted", [&] {
    c.sides[1]->proc->signal(SIGKILL);
    REQUIRE(c.sides[1]->proc->wait(5s));
    auto dirs = c.sides[1]->dirs;
    c.sides[1] = std::make_unique<sidecar_process>(
      c.sims[1]->endpoint(), dirs,
      std::vector<std::string>{"--discovery-dir", c.discovery.str(),
                               "--worker-id", "worker-1"});
  });
  inject("router killed -9, restarted", [&] {
    c.router->signal(SIGKILL);
    REQUIRE(c.router->wait(5s));
    c.start_router();
  });
  inject("engine 1 paused 3 s (SIGSTOP), resumed", [&] {
    c.sims[1]->proc->signal(SIGSTOP);
    std::this_thread::sleep_for(3s);
    c.sims[1]->proc->signal(SIGCONT);
  });
  load.join();
  // Each stream belongs to the fault window it started in.
  for (const auto& s : results) {
    fault_row* row = nullptr;
    for (auto& r : rows)
      if (s.started_s >= r.at_s - 1)
        row = &r;
    if (!row)
      continue; // before the first fault
    // Lost: a stream that claims success without all its tokens. A stream
    // cut without [DONE] (refused, reset, closed) is broken, which the
    // client sees.
    bool done = s.status == 200 && s.done;
    if (done && !s.error && s.tokens == max_tokens)
      ++row->complete;
    else if (s.status >= 400 || (done && s.error))
      ++row->clear_error;
    else if (!s.done)
      ++row->broken;
    else
      ++row->lost;
  }
  for (const auto& r : rows) {
    INFO(r.fault);
    CHECK(r.lost == 0);
    CHECK(r.complete > 0);
    if (r.fault.rfind("router", 0) != 0)
      CHECK(r.broken == 0); // only the router's own death cuts connections
  }
  // Every index converges to its engine's cache.
  for (size_t i = 0; i < c.sims.size(); ++i)
    CHECK(eventually(
      [&] { return index_matches_engine(*c.sides[i], *c.sims[i]); }, 15s));
  auto text = table(rows);
  WARN(text);
  if (const char* out = std::getenv("OUTRIDER_FAULTS_TABLE"))
    std::ofstream(out) << text;
}
