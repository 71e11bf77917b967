// The fault suite (scripts/faults; hidden from the default run). While a
// workload streams through the router, faults are injected in turn, in five
// setups: separate processes with relay dispatch and with direct dispatch,
// SGLang engines with direct dispatch, `--role all` (its own children
// killed and restarted by it), and an engine whose replay buffer is too
// small for the outage. After each: every
// stream started meanwhile either completed with exactly the engine's
// deterministic tokens or failed with a clear error (an HTTP error, an
// error event, or a connection cut while the router itself was down); none
// lost, none wrong; the worker set is whole again; recovery times. Then the
// indexes converge to the engines' caches (the simulator's ground truth).
// With OUTRIDER_FAULTS_TABLE set, writes the table of every setup's rows
// there (docs/faults.md).

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <set>

#include "tests/e2e/fault_suite.hpp"
#include "tests/e2e/router_cluster.hpp"
#include "vllm.grpc.pb.h"

using namespace outrider::test;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

std::vector<fault_row>& all_rows() {
  static std::vector<fault_row> rows;
  return rows;
}

// Checks the rows of one setup and adds them to the table.
void account(const std::vector<fault_row>& rows) {
  for (const auto& r : rows) {
    INFO(r.setup << ": " << r.fault);
    if (!r.first_error.empty())
      WARN(r.setup << ": " << r.fault << ": first error: " << r.first_error);
    CHECK(r.lost == 0);
    CHECK(r.wrong == 0);
    CHECK(r.complete > 0);
    if (r.fault.find("router") == std::string::npos)
      CHECK(r.broken == 0); // only the router's own death cuts connections
  }
  auto& all = all_rows();
  all.insert(all.end(), rows.begin(), rows.end());
  auto text = fault_table(all);
  WARN(text);
  if (const char* out = std::getenv("OUTRIDER_FAULTS_TABLE"))
    std::ofstream(out) << text;
}

void kill_and_restart_engine(sim_process& sim) {
  sim.proc->signal(SIGKILL);
  REQUIRE(sim.proc->wait(5s));
  sim.start();
  REQUIRE(sim.wait_serving(10s));
}

void kill_and_restart_sidecar(cluster& c, size_t i) {
  c.sides[i]->proc->signal(SIGKILL);
  REQUIRE(c.sides[i]->proc->wait(5s));
  auto dirs = c.sides[i]->dirs;
  c.sides[i] = std::make_unique<sidecar_process>(
    c.sims[i]->endpoint(), dirs,
    std::vector<std::string>{"--discovery-dir", c.discovery.str(),
                             "--worker-id", "worker-" + std::to_string(i)});
}

// 2 KB of garbage in the middle of every table and log file of the store
// (or in CURRENT when none is big enough yet).
void corrupt_store(const fs::path& dir) {
  bool any = false;
  for (const auto& e : fs::directory_iterator(dir)) {
    auto ext = e.path().extension().string();
    if ((ext != ".sst" && ext != ".log") || e.file_size() < 8192)
      continue;
    std::fstream f(e.path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(e.file_size() / 2));
    f << std::string(2048, '\x5a');
    any = true;
  }
  if (!any)
    std::ofstream(dir / "CURRENT", std::ios::trunc) << "garbage\n";
}

void pause_engine(pid_t pid) {
  kill(pid, SIGSTOP);
  std::this_thread::sleep_for(3s);
  kill(pid, SIGCONT);
}

// The restarted sidecar `i` is ready (registered) and the router whole.
std::function<bool()> sidecar_back(cluster& c, size_t i) {
  return [&c, i] {
    return c.sides[i]->get("/ready") == 200 &&
           router_whole(c.http_port, c.router_status, 2);
  };
}

// The faults every setup of separate processes goes through.
void common_faults(cluster& c, fault_workload& w, const std::string& setup) {
  auto whole = [&] { return router_whole(c.http_port, c.router_status, 2); };
  REQUIRE(w.inject(
    setup, "engine 0 killed -9, restarted",
    [&] { kill_and_restart_engine(*c.sims[0]); }, whole));
  REQUIRE(w.inject(
    setup, "sidecar 1 killed -9, restarted",
    [&] { kill_and_restart_sidecar(c, 1); }, sidecar_back(c, 1)));
  REQUIRE(w.inject(
    setup, "router killed -9, restarted",
    [&] {
      c.router->signal(SIGKILL);
      REQUIRE(c.router->wait(5s));
      c.start_router(c.router_flags);
    },
    whole));
  REQUIRE(w.inject(
    setup, "engine 1 paused 3 s (SIGSTOP), resumed",
    [&] { pause_engine(c.sims[1]->proc->pid()); }, whole));
}

sim_process::options fast_engine(size_t buffer_steps) {
  sim_process::options so;
  so.extra = {"--speedup", "10"};
  so.num_blocks = 4096;
  so.buffer_steps = buffer_steps;
  return so;
}

// A sidecar's index of rank 0 holds only blocks its engine has (after lost
// history it cannot hold all of them).
bool index_within_engine(const sidecar_process& side, const sim_process& sim) {
  std::string body;
  if (side.get("/debug/index", &body) != 200)
    return false;
  auto doc = json::parse(body, nullptr, false);
  auto truth = sim.cache(0);
  if (!doc.is_object() || !truth.is_object())
    return false;
  std::set<uint64_t> have;
  for (const auto& b : truth["blocks"])
    have.insert(b["hash"].get<uint64_t>());
  if (!doc["ranks"].contains("0"))
    return true;
  for (const auto& b : doc["ranks"]["0"]["blocks"])
    if (!have.count(b["hash"].get<uint64_t>()))
      return false;
  return true;
}

} // namespace

// Through the relays, a stream per request (relay) or every request to one
// relay on one multiplexed stream (mux, the default; a sidecar stopped with
// SIGTERM drains its streams: new requests refused and placed elsewhere,
// those running cut at its grace and moved).
TEST_CASE("fault suite: separate processes with relay or mux dispatch",
          "[.][faults]") {
  auto dispatch = GENERATE(std::string{"relay"}, std::string{"mux"});
  // A replay buffer that covers the whole run, so that a store lost to
  // corruption is rebuilt whole from the engine.
  cluster c{2, fast_engine(400000), {"--dispatch", dispatch}};
  REQUIRE(c.complete(tokens(1, 8), 2)["choices"].size() == 1);
  const std::string setup = "separate, " + dispatch;
  fault_workload w{c.http_port};
  common_faults(c, w, setup);
  REQUIRE(w.inject(
    setup, "sidecar 0 stopped, its store corrupted, restarted",
    [&] {
      c.sides[0]->proc->signal(SIGTERM);
      REQUIRE(c.sides[0]->proc->wait(10s));
      corrupt_store(c.sides[0]->dirs->data.path);
      kill_and_restart_sidecar(c, 0); // (it is no longer running)
    },
    sidecar_back(c, 0)));
  account(w.finish());
  for (size_t i = 0; i < c.sims.size(); ++i)
    CHECK(eventually(
      [&] { return index_matches_engine(*c.sides[i], *c.sims[i]); }, 15s));
  // The corruption was seen and counted, not served.
  double seen = 0;
  for (const char* kind : {"wal", "store", "record"})
    seen += c.sides[0]
              ->metric(std::string{"outrider_index_corruption_total{kind=\""} +
                       kind + "\"}")
              .value_or(0);
  CHECK(seen >= 1);
}

TEST_CASE("fault suite: separate processes with direct dispatch",
          "[.][faults]") {
  cluster c{2, fast_engine(400000), {"--dispatch", "direct"}};
  REQUIRE(c.complete(tokens(1, 8), 2)["choices"].size() == 1);
  fault_workload w{c.http_port};
  common_faults(c, w, "separate, direct");
  account(w.finish());
  for (size_t i = 0; i < c.sims.size(); ++i)
    CHECK(eventually(
      [&] { return index_matches_engine(*c.sides[i], *c.sims[i]); }, 15s));
}

TEST_CASE("fault suite: SGLang engines with direct dispatch", "[.][faults]") {
  // Engines serving only SGLang's services, found by the sidecars'
  // --engine-protocol auto; the router streams from them in SGLang's
  // dialect. SGLang advertises no replay: a sidecar killed while its
  // engine works loses that history (counted) and goes on from live.
  auto so = fast_engine(400000);
  so.extra.insert(so.extra.end(),
                  {"--protocol", "sglang", "--kv-hash-format", "int64"});
  cluster c{2, so, {"--dispatch", "direct"}};
  REQUIRE(c.complete(tokens(1, 8), 2)["choices"].size() == 1);
  for (size_t i = 0; i < c.sides.size(); ++i)
    REQUIRE(
      read_all(c.discovery.str() + "/worker-" + std::to_string(i) + ".json")
        .find("\"protocol\":\"sglang\"") != std::string::npos);
  fault_workload w{c.http_port};
  common_faults(c, w, "SGLang, direct");
  account(w.finish());
  for (size_t i = 0; i < c.sims.size(); ++i)
    CHECK(eventually(
      [&] { return index_within_engine(*c.sides[i], *c.sims[i]); }, 15s));
}

TEST_CASE("fault suite: an engine whose replay buffer is too small for the "
          "outage",
          "[.][faults]") {
  cluster c{2, fast_engine(20)};
  REQUIRE(c.complete(tokens(1, 8), 2)["choices"].size() == 1);
  const std::string setup = "separate, mux, replay buffer 20 steps";
  fault_workload w{c.http_port, 0}; // every prompt new
  // While its sidecar is down (and with it the relay to it), the engine
  // serves other clients: 60 new prompts straight to it, 60 batches of
  // KV events where its buffer keeps 20.
  REQUIRE(w.inject(
    setup,
    "sidecar 0 killed -9; its engine serves 60 requests meanwhile; restarted",
    [&] {
      c.sides[0]->proc->signal(SIGKILL);
      REQUIRE(c.sides[0]->proc->wait(5s));
      auto stub = vllm::Inference::NewStub(c.sims[0]->channel());
      for (uint32_t i = 0; i < 60; ++i) {
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + 20s);
        vllm::GenerateRequest req;
        for (uint32_t k = 0; k < 16; ++k)
          req.mutable_token_ids()->add_ids(20000 + 16 * i + k);
        req.mutable_stopping()->set_max_new_tokens(2);
        vllm::GenerateResponse resp;
        REQUIRE(stub->Generate(&ctx, req, &resp).ok());
      }
      kill_and_restart_sidecar(c, 0);
    },
    sidecar_back(c, 0)));
  account(w.finish());
  // The history the engine no longer has is given up on (counted), the
  // index goes on from live and never claims a block the engine lacks.
  CHECK(eventually(
    [&] {
      return c.sides[0]
               ->metric("outrider_kv_gaps_unrecoverable_total{rank=\"0\"}")
               .value_or(0) >= 1;
    },
    10s));
  CHECK(eventually([&] { return index_within_engine(*c.sides[0], *c.sims[0]); },
                   10s));
}

namespace {

// The child of `--role all` whose command line holds `what` and `worker`.
pid_t child_running(pid_t parent, const std::string& what,
                    const std::string& worker) {
  for (auto kid : children_of(parent)) {
    auto cmd = read_all("/proc/" + std::to_string(kid) + "/cmdline");
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    if (!dead(kid) && cmd.find(what) != std::string::npos &&
        cmd.find(worker) != std::string::npos)
      return kid;
  }
  return -1;
}

} // namespace

TEST_CASE("fault suite: role all restarts the engines and sidecars it runs",
          "[.][faults]") {
  temp_dir work;
  auto http_port = free_port();
  auto status = free_port();
  child_process all{{OUTRIDER_BIN, "--role", "all", "--sim-engines", "2",
                     "--sim-speedup", "10", "--data-dir", work.str(),
                     "--system-port", std::to_string(status), "--http-port",
                     std::to_string(http_port), "--grpc-port", "0"}};
  auto whole = [&] { return router_whole(http_port, status, 2); };
  REQUIRE(eventually(whole, 30s));
  // The children in start order: engine 0, sidecar 0, engine 1, sidecar 1.
  auto kids = children_of(all.pid());
  REQUIRE(kids.size() == 4);
  const std::string setup = "role all, mux";
  fault_workload w{http_port};
  auto restarted = [&](pid_t old) {
    return [&, old] {
      auto now = children_of(all.pid());
      return now.size() == 4 &&
             std::find(now.begin(), now.end(), old) == now.end() && whole();
    };
  };
  pid_t engine = kids[0];
  REQUIRE(read_all("/proc/" + std::to_string(engine) + "/cmdline")
            .find("outrider-sim") != std::string::npos);
  REQUIRE(w.inject(
    setup, "engine 0 killed -9 (its parent restarts it)",
    [&] { kill(engine, SIGKILL); }, restarted(engine)));
  pid_t side = child_running(all.pid(), "sidecar", "worker-1");
  REQUIRE(side > 0);
  REQUIRE(w.inject(
    setup, "sidecar 1 killed -9 (its parent restarts it)",
    [&] { kill(side, SIGKILL); }, restarted(side)));
  pid_t paused = -1;
  for (auto kid : children_of(all.pid()))
    if (read_all("/proc/" + std::to_string(kid) + "/cmdline")
          .find("outrider-sim") != std::string::npos)
      paused = kid;
  REQUIRE(paused > 0);
  REQUIRE(w.inject(
    setup, "an engine paused 3 s (SIGSTOP), resumed",
    [&] { pause_engine(paused); }, whole));
  account(w.finish());
  CHECK(metric_value(status, "outrider_local_child_restarts_total") == 2);
  all.signal(SIGTERM);
  CHECK(all.wait(30s));
}
