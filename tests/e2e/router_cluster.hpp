#pragma once

// A router in front of simulated engines and their sidecars, all real
// processes on loopback, for end-to-end tests.

#include <atomic>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "openengine.grpc.pb.h"
#include "tests/e2e/sidecar_process.hpp"
#include "tests/e2e/sim_process.hpp"
#include "vllm.grpc.pb.h"

namespace outrider::test {

using namespace std::chrono_literals;

inline std::vector<uint32_t> tokens(uint32_t first, size_t n) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < n; ++i)
    out.push_back(first + static_cast<uint32_t>(i));
  return out;
}

inline std::vector<uint32_t> concat(std::vector<uint32_t> a,
                                    const std::vector<uint32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// One HTTP request on 127.0.0.1 (Connection: close); status and body.
inline std::pair<int, std::string> http(uint16_t port,
                                        const std::string& method,
                                        const std::string& path,
                                        const std::string& body = {}) {
  std::vector<std::string> args{"/usr/bin/curl",
                                "-s",
                                "-o",
                                "-",
                                "-w",
                                "\n%{http_code}",
                                "-X",
                                method,
                                "http://127.0.0.1:" + std::to_string(port) +
                                  path};
  if (!body.empty()) {
    args.push_back("-H");
    args.push_back("Content-Type: application/json");
    args.push_back("--data-binary");
    args.push_back(body);
  }
  child_process curl{args};
  REQUIRE(curl.wait(60s) == 0);
  auto out = curl.output();
  auto nl = out.rfind('\n');
  return {std::atoi(out.c_str() + nl + 1), out.substr(0, nl)};
}

// A non-streamed completion through a router's frontend, which must answer
// 200; its body.
inline nlohmann::json complete_on(uint16_t http_port,
                                  const std::vector<uint32_t>& prompt,
                                  uint32_t max_tokens) {
  auto [code, body] =
    http(http_port, "POST", "/v1/completions",
         nlohmann::json{{"prompt", prompt}, {"max_tokens", max_tokens}}.dump());
  INFO(body);
  REQUIRE(code == 200);
  return nlohmann::json::parse(body);
}

// Reads an SSE body: the token ids in order, and whether [DONE] came.
inline std::pair<std::vector<uint32_t>, bool>
read_sse(const std::string& body) {
  std::vector<uint32_t> toks;
  bool done = false;
  std::istringstream in{body};
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("data: ", 0) != 0)
      continue;
    if (line == "data: [DONE]") {
      done = true;
      continue;
    }
    auto ev = nlohmann::json::parse(line.substr(6), nullptr, false);
    if (ev.is_object() && ev.contains("choices"))
      for (auto t : ev["choices"][0]["token_ids"])
        toks.push_back(t.get<uint32_t>());
  }
  return {toks, done};
}

// Runs a prompt straight on an engine (to warm its cache).
inline void warm(const sim_process& sim, const std::vector<uint32_t>& prompt,
                 int rank = -1) {
  auto stub = vllm::Inference::NewStub(sim.channel());
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 20s);
  if (rank >= 0)
    ctx.AddMetadata("x-data-parallel-rank", std::to_string(rank));
  vllm::GenerateRequest req;
  req.mutable_token_ids()->mutable_ids()->Add(prompt.begin(), prompt.end());
  req.mutable_stopping()->set_max_new_tokens(1);
  vllm::GenerateResponse resp;
  auto st = stub->Generate(&ctx, req, &resp);
  // Failed once under ASan beside two busy loops (a store-only tier's
  // test, 1 of 168): what the engine said, and its log's end.
  if (!st.ok()) {
    auto log = sim.proc ? sim.proc->output() : std::string{};
    if (log.size() > 3000)
      log = log.substr(log.size() - 3000);
    INFO("engine's status " << st.error_code() << ": " << st.error_message()
                            << "\nits log's end:\n"
                            << log);
    REQUIRE(st.ok());
  }
}

// A sidecar's index of rank 0 equals its engine's cache (the simulator's
// ground truth), and that cache is not empty.
inline bool index_matches_engine(const sidecar_process& side,
                                 const sim_process& sim) {
  auto blocks_of = [](const nlohmann::json& list) {
    std::map<uint64_t, std::vector<uint32_t>> out;
    for (const auto& b : list)
      out[b["hash"].get<uint64_t>()] =
        b["token_ids"].get<std::vector<uint32_t>>();
    return out;
  };
  std::string body;
  if (side.get("/debug/index", &body) != 200)
    return false;
  auto doc = nlohmann::json::parse(body, nullptr, false);
  auto truth = sim.cache(0);
  if (!doc.is_object() || !doc["ranks"].contains("0") || !truth.is_object())
    return false;
  auto want = blocks_of(truth["blocks"]);
  return !want.empty() && blocks_of(doc["ranks"]["0"]["blocks"]) == want;
}

// The command line of a router on a discovery directory, with `flags`
// after its ports (grpc 0: no gRPC frontend).
inline std::vector<std::string>
router_command(const std::string& discovery, uint16_t http, uint16_t status,
               uint16_t grpc, const std::vector<std::string>& flags = {}) {
  std::vector<std::string> args{OUTRIDER_BIN,
                                "--role",
                                "router",
                                "--discovery-dir",
                                discovery,
                                "--http-port",
                                std::to_string(http),
                                "--system-port",
                                std::to_string(status),
                                "--grpc-port",
                                std::to_string(grpc)};
  args.insert(args.end(), flags.begin(), flags.end());
  return args;
}

// A small cluster: engines, their sidecars (one discovery directory), a
// router.
struct cluster {
  temp_dir discovery;
  std::vector<std::unique_ptr<sim_process>> sims;
  std::vector<std::unique_ptr<sidecar_process>> sides;
  uint16_t http_port = free_port();
  uint16_t grpc_port = free_port();
  uint16_t router_status = free_port();
  std::unique_ptr<child_process> router;
  std::vector<std::string> router_flags; // as the cluster was made with

  explicit cluster(int workers, sim_process::options so = {},
                   std::vector<std::string> router_flags = {},
                   std::vector<std::string> sidecar_flags = {}) {
    for (int i = 0; i < workers; ++i) {
      sims.push_back(std::make_unique<sim_process>(so));
      REQUIRE(sims.back()->wait_serving(allowed(10s)));
      auto dirs = std::make_shared<sidecar_dirs>();
      sides.push_back(
        std::make_unique<sidecar_process>(sims.back()->endpoint(), dirs, [&] {
          std::vector<std::string> f{"--discovery-dir", discovery.str(),
                                     "--worker-id",
                                     "worker-" + std::to_string(i)};
          f.insert(f.end(), sidecar_flags.begin(), sidecar_flags.end());
          return f;
        }()));
    }
    // Sanitized sidecars two at a time beside a busy core: once more than
    // 10 s (a TLS sidecar still "starting" at the deadline, 1 of 169).
    for (auto& s : sides) {
      bool ready =
        eventually([&] { return s->get("/ready") == 200; }, allowed(10s));
      if (!ready) { // what it says of itself, to find why next time
        std::string health;
        s->get("/health", &health);
        auto out = s->proc ? s->proc->output() : std::string{};
        if (out.size() > 4000)
          out = out.substr(out.size() - 4000);
        INFO("sidecar /health: " << health << "\nits log's end:\n" << out);
        REQUIRE(ready);
      }
    }
    this->router_flags = router_flags;
    start_router(std::move(router_flags));
  }

  void start_router(std::vector<std::string> flags = {}) {
    auto args = router_command(discovery.str(), http_port, router_status,
                               grpc_port, flags);
    router = std::make_unique<child_process>(args);
    // A router loading a 150,000-token tokenizer under ASan took more than
    // 10 s to turn ready in a whole e2e run (alone: less).
    bool ready =
      eventually([&] { return http_get(router_status, "/ready") == 200; }, 60s);
    if (!ready) { // what it says of itself, and whether it still runs
      std::string health;
      int code = http_get(router_status, "/health", &health);
      auto exited = router->wait(std::chrono::milliseconds{0});
      auto out = router->output();
      if (out.size() > 4000)
        out = out.substr(out.size() - 4000);
      INFO("router /health ("
           << code << "): " << health << "\nexit: "
           << (exited ? std::to_string(*exited) : std::string{"still running"})
           << "\nits log's end:\n"
           << out);
      REQUIRE(ready);
    }
    // /ready means "frontends listening"; a first request sent now could
    // still find no worker. Wait (bounded, not required: some tests expect
    // workers to be refused) until the router knows every sidecar.
    eventually(
      [&] {
        return router_metric("outrider_router_workers") >=
               static_cast<double>(sides.size());
      },
      10s);
  }

  double router_metric(const std::string& series) const {
    return metric_value(router_status, series);
  }

  nlohmann::json complete(const std::vector<uint32_t>& prompt,
                          uint32_t max_tokens) {
    return complete_on(http_port, prompt, max_tokens);
  }
};

// A copy of worker-0's record under another id, its relay at `relay`
// (a planted, copied or stale record).
// One Generate of two tokens straight to `relay`, naming `worker` (none:
// empty), read to its end: how it ended.
inline grpc::Status generate_on(const std::string& relay,
                                const std::string& worker) {
  auto stub = openengine::v1::Inference::NewStub(
    grpc::CreateChannel(relay, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + allowed(10s));
  if (!worker.empty())
    ctx.AddMetadata("x-outrider-worker", worker);
  openengine::v1::GenerateRequest req;
  for (uint32_t t : tokens(400, 8))
    req.mutable_token_ids()->add_ids(t);
  req.mutable_stopping()->set_max_tokens(2);
  auto reader = stub->Generate(&ctx, req);
  openengine::v1::GenerateResponse resp;
  while (reader->Read(&resp)) {
  }
  return reader->Finish();
}

inline void plant_record(const cluster& c, const std::string& id,
                         const std::string& relay) {
  std::ifstream in{c.discovery.path / "worker-0.json"};
  auto rec = nlohmann::json::parse(in);
  rec["worker_id"] = id;
  rec["instance_id"] = id;
  rec["relay_endpoint"] = relay;
  std::ofstream{c.discovery.path / (id + ".json.tmp")} << rec.dump() << "\n";
  std::filesystem::rename(c.discovery.path / (id + ".json.tmp"),
                          c.discovery.path / (id + ".json"));
}

} // namespace outrider::test

namespace outrider::test {

// Once the router has streamed a first token, a thread sends `sig` to
// `target`. Join it after the request; true when it was sent.
struct signal_after_first_token {
  std::atomic<bool> sent{false};
  std::thread sender;
  signal_after_first_token(cluster& c, child_process& target, int sig)
    : sender{[this, &c, &target, sig] {
        eventually(
          [&] {
            return c.router_metric("outrider_router_ttft_seconds_count") >= 1;
          },
          20s);
        target.signal(sig);
        sent = true;
      }} {}
  ~signal_after_first_token() {
    if (sender.joinable())
      sender.join();
  }
  bool join() {
    sender.join();
    return sent;
  }
};

// A stream that will break: worker 0's engine caches `prefix` (so the
// request goes there), and once the router has seen a first token that
// engine is killed (SIGKILL), or worker 0's sidecar when asked. Join it
// after the request; true when it fired.
struct mid_stream_kill {
  mid_stream_kill(cluster& c, const std::vector<uint32_t>& prefix,
                  bool sidecar = false)
    : warmed{warm_for(c, prefix)}, kill{c,
                                        sidecar ? *c.sides[0]->proc
                                                : *c.sims[0]->proc,
                                        SIGKILL} {}
  bool join() { return kill.join(); }

 private:
  static bool warm_for(cluster& c, const std::vector<uint32_t>& prefix) {
    warm(*c.sims[0], prefix);
    REQUIRE(eventually(
      [&] { return c.router_metric("outrider_router_index_entries") >= 8; },
      10s));
    return true;
  }
  bool warmed;
  signal_after_first_token kill;
};

// Two engines warmed with one prefix each: requests sharing a prefix go to
// the worker that holds it (at least 9 in 10 find their 64 tokens cached).
inline void check_prefix_routing(cluster& c) {
  auto prefix_a = tokens(1000, 64); // 16 blocks of 4
  auto prefix_b = tokens(9000, 64);
  warm(*c.sims[0], prefix_a);
  warm(*c.sims[1], prefix_b);
  // The router learns both caches from the sidecars.
  REQUIRE(eventually(
    [&] { return c.router_metric("outrider_router_index_entries") >= 32; },
    10s));
  int hits = 0;
  for (uint32_t i = 0; i < 10; ++i) {
    auto suffix = tokens(20000 + 100 * i, 6);
    auto ra = c.complete(concat(prefix_a, suffix), 2);
    auto rb = c.complete(concat(prefix_b, suffix), 2);
    for (const auto& r : {ra, rb})
      hits += r["usage"]["prompt_tokens_details"]["cached_tokens"] == 64;
  }
  CHECK(hits >= 18); // >= 90%
}

} // namespace outrider::test
