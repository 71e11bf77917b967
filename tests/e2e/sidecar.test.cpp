// End-to-end tests of `outrider --role sidecar` against outrider-sim: real
// processes, real gRPC, real ZMQ, real RocksDB files, file discovery.
#include <atomic>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <thread>

#include <catch2/catch.hpp>

#include "tests/e2e/sidecar_process.hpp"
#include "tests/e2e/sim_process.hpp"
#include "vllm.grpc.pb.h"

using namespace outrider::test;
using namespace std::chrono_literals;

namespace {

// Runs one request to its end; true when it succeeded.
bool generate(const sim_process& sim, uint32_t first, size_t n,
              uint32_t max_tokens = 2) {
  auto stub = vllm::Inference::NewStub(sim.channel());
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 20s);
  vllm::GenerateRequest req;
  for (size_t i = 0; i < n; ++i)
    req.mutable_token_ids()->add_ids(first + static_cast<uint32_t>(i));
  req.mutable_stopping()->set_max_new_tokens(max_tokens);
  vllm::GenerateResponse resp;
  return stub->Generate(&ctx, req, &resp).ok();
}

using block_map =
  std::map<uint64_t, std::pair<nlohmann::json, std::vector<uint32_t>>>;

block_map blocks_of(const nlohmann::json& list) {
  block_map out;
  for (const auto& b : list)
    out[b["hash"].get<uint64_t>()] = {
      b["parent"], b["token_ids"].get<std::vector<uint32_t>>()};
  return out;
}

nlohmann::json sidecar_index(const sidecar_process& side) {
  std::string body;
  if (side.get("/debug/index", &body) != 200)
    return nullptr;
  return nlohmann::json::parse(body, nullptr, false);
}

block_map index_blocks(const sidecar_process& side, int rank = 0) {
  auto doc = sidecar_index(side);
  if (!doc.is_object() || !doc["ranks"].contains(std::to_string(rank)))
    return {};
  return blocks_of(doc["ranks"][std::to_string(rank)]["blocks"]);
}

block_map truth_blocks(const sim_process& sim, int rank = 0) {
  auto doc = sim.cache(rank);
  return doc.is_object() ? blocks_of(doc["blocks"]) : block_map{};
}

std::string instance_of(const sim_process& sim) {
  auto doc = sim.cache(0);
  return doc.is_object() ? doc["instance_id"].get<std::string>() : "";
}

bool index_matches(const sidecar_process& side, const sim_process& sim) {
  auto truth = truth_blocks(sim);
  return !truth.empty() && index_blocks(side) == truth;
}

bool registered_as(const sidecar_process& side, const std::string& instance) {
  auto recs = side.records();
  return recs.size() == 1 && recs[0]["instance_id"] == instance &&
         side.get("/ready") == 200;
}

} // namespace

TEST_CASE("a sidecar started before its engine registers once it serves") {
  sim_process sim{{.start_now = false}};
  sidecar_process side{sim.endpoint()};
  REQUIRE(eventually([&] { return side.get("/live") == 200; }, 10s));
  CHECK(side.get("/ready") == 503);
  CHECK(side.records().empty());
  CHECK(side.metric("outrider_registered").value_or(0) == 0.0);
  sim.start();
  REQUIRE(sim.wait_serving(10s));
  auto id = instance_of(sim);
  REQUIRE(eventually([&] { return registered_as(side, id); }, 10s));
  auto rec = side.records()[0];
  CHECK(rec["worker_id"] == "worker-under-test");
  CHECK(rec["kv_block_size"] == 4);
  CHECK(rec["engine_endpoint"] == sim.endpoint());
  CHECK(side.metric("outrider_registered") == 1.0);
  // Events flow into the index.
  REQUIRE(generate(sim, 10, 17));
  CHECK(eventually([&] { return index_matches(side, sim); }, 5s));
}

TEST_CASE("an engine killed and replaced: deregistered, reset, re-registered") {
  sim_process sim{{}};
  REQUIRE(sim.wait_serving(10s));
  sidecar_process side{sim.endpoint()};
  auto first = instance_of(sim);
  REQUIRE(eventually([&] { return registered_as(side, first); }, 10s));
  REQUIRE(generate(sim, 10, 17));
  REQUIRE(eventually([&] { return index_matches(side, sim); }, 5s));

  sim.proc->signal(SIGKILL);
  auto t0 = std::chrono::steady_clock::now();
  REQUIRE(eventually([&] { return side.records().empty(); }, 5s));
  CHECK(std::chrono::steady_clock::now() - t0 < 1s);
  CHECK(side.get("/ready") == 503);

  sim.start(); // a new process: a new instance id, sequences from 0
  REQUIRE(sim.wait_serving(10s));
  auto second = instance_of(sim);
  REQUIRE(second != first);
  REQUIRE(eventually([&] { return registered_as(side, second); }, 10s));
  auto doc = sidecar_index(side);
  CHECK(doc["instance_id"] == second);
  CHECK(index_blocks(side).empty()); // the old engine's blocks are gone
  REQUIRE(generate(sim, 500, 9));
  CHECK(eventually([&] { return index_matches(side, sim); }, 5s));
}

TEST_CASE("a sidecar killed under load recovers every event") {
  sim_process sim{{.num_blocks = 4096}};
  REQUIRE(sim.wait_serving(10s));
  auto dirs = std::make_shared<sidecar_dirs>();
  auto side = std::make_unique<sidecar_process>(sim.endpoint(), dirs);
  auto id = instance_of(sim);
  REQUIRE(eventually([&] { return registered_as(*side, id); }, 10s));
  std::atomic<bool> stop{false};
  std::atomic<int> done{0};
  std::thread load([&] {
    for (uint32_t i = 0; i < 2000 && !stop; ++i)
      if (generate(sim, 1 + 37 * (i % 400), 13))
        ++done;
  });
  REQUIRE(eventually([&] { return done > 20; }, 10s));
  side->proc->signal(SIGKILL);
  REQUIRE(side->proc->wait(5s));
  int at_kill = done;
  REQUIRE(eventually([&] { return done > at_kill + 20; }, 10s));
  side = std::make_unique<sidecar_process>(sim.endpoint(), dirs);
  REQUIRE(eventually([&] { return done > at_kill + 60; }, 20s));
  stop = true;
  load.join();
  REQUIRE(eventually([&] { return registered_as(*side, id); }, 10s));
  CHECK(eventually([&] { return index_matches(*side, sim); }, 10s));
  // Nothing was lost: no unrecoverable gap.
  CHECK(side->metric("outrider_kv_gaps_unrecoverable_total{rank=\"0\"}")
          .value_or(0) == 0);
  std::string health;
  side->get("/health", &health);
  INFO(health);
}

TEST_CASE("a paused engine is deregistered and its index kept and updated") {
  sim_process sim{{}};
  REQUIRE(sim.wait_serving(10s));
  sidecar_process side{sim.endpoint()};
  auto id = instance_of(sim);
  REQUIRE(eventually([&] { return registered_as(side, id); }, 10s));
  REQUIRE(generate(sim, 10, 21));
  REQUIRE(eventually([&] { return index_matches(side, sim); }, 5s));
  auto control = vllm::Control::NewStub(sim.channel());
  {
    grpc::ClientContext ctx;
    vllm::PauseGenerationRequest req;
    vllm::PauseGenerationResponse resp;
    REQUIRE(control->PauseGeneration(&ctx, req, &resp).ok());
  }
  REQUIRE(eventually([&] { return side.records().empty(); }, 2s));
  CHECK(side.get("/ready") == 503);
  CHECK(index_blocks(side).size() == 5); // kept
  // Events are still ingested while paused.
  REQUIRE(sim.post_debug("/reset_prefix_cache"));
  CHECK(eventually([&] { return index_blocks(side).empty(); }, 5s));
  {
    grpc::ClientContext ctx;
    vllm::ResumeGenerationRequest req;
    vllm::ResumeGenerationResponse resp;
    REQUIRE(control->ResumeGeneration(&ctx, req, &resp).ok());
  }
  CHECK(eventually([&] { return registered_as(side, id); }, 5s));
}

TEST_CASE("SIGTERM after GET /debug/index: the sidecar exits") {
  sim_process sim{{}};
  REQUIRE(sim.wait_serving(10s));
  sidecar_process side{sim.endpoint()};
  auto id = instance_of(sim);
  REQUIRE(eventually([&] { return registered_as(side, id); }, 10s));
  std::string index;
  REQUIRE(side.get("/debug/index", &index) == 200);
  side.proc->signal(SIGTERM);
  // Used to hang for ever (4 runs of 4) in the actor system's destructor.
  auto code = side.proc->wait(5s);
  REQUIRE(code);
  CHECK(*code == 0);
}

TEST_CASE("SIGTERM: not ready before the record goes, engine untouched") {
  sim_process sim{{}};
  REQUIRE(sim.wait_serving(10s));
  sidecar_process side{sim.endpoint()};
  auto id = instance_of(sim);
  REQUIRE(eventually([&] { return registered_as(side, id); }, 10s));
  side.proc->signal(SIGTERM);
  bool ready_without_record = false;
  bool saw_not_ready = false;
  for (int i = 0; i < 500; ++i) {
    auto code = side.get("/ready");
    auto recs = side.records().size();
    // Never ready once the record is gone: /ready read after the records
    // (a 200 read before them may predate the shutdown, which now withdraws
    // the record at once).
    auto code2 = side.get("/ready");
    if (recs == 0 && code2 == 200)
      ready_without_record = true;
    saw_not_ready |= code == 503 || code2 == 503 || code == -1;
    if (recs == 0 && code2 == -1)
      break;
  }
  CHECK_FALSE(ready_without_record);
  CHECK(saw_not_ready);
  auto code = side.proc->wait(10s);
  REQUIRE(code);
  CHECK(*code == 0);
  CHECK(side.records().empty());
  CHECK(sim.wait_serving(1s)); // the engine keeps serving
  CHECK(generate(sim, 1, 5));
}

TEST_CASE("history lost while the sidecar was down resets the rank") {
  sim_process sim{{.buffer_steps = 3}};
  REQUIRE(sim.wait_serving(10s));
  auto dirs = std::make_shared<sidecar_dirs>();
  auto side = std::make_unique<sidecar_process>(sim.endpoint(), dirs);
  auto id = instance_of(sim);
  REQUIRE(eventually([&] { return registered_as(*side, id); }, 10s));
  REQUIRE(generate(sim, 10, 9));
  REQUIRE(eventually([&] { return index_matches(*side, sim); }, 5s));
  side->proc->signal(SIGKILL);
  REQUIRE(side->proc->wait(5s));
  for (uint32_t i = 0; i < 8; ++i)
    REQUIRE(generate(sim, 1000 + 100 * i, 9));
  side = std::make_unique<sidecar_process>(sim.endpoint(), dirs);
  REQUIRE(eventually([&] { return registered_as(*side, id); }, 10s));
  CHECK(eventually(
    [&] {
      return side->metric("outrider_kv_gaps_unrecoverable_total{rank=\"0\"}") >=
             1.0;
    },
    5s));
  // Consistent: everything indexed is in the engine, as it is there.
  auto truth = truth_blocks(sim);
  auto idx = index_blocks(*side);
  for (const auto& [hash, block] : idx) {
    INFO(hash);
    REQUIRE(truth.count(hash));
    CHECK(truth[hash] == block);
  }
  // And new events apply on top.
  REQUIRE(generate(sim, 20000, 9));
  CHECK(eventually(
    [&] {
      auto now = index_blocks(*side);
      return now.size() == idx.size() + 2;
    },
    5s));
}

TEST_CASE("garbage on the KV stream is counted and does no harm") {
  sim_process sim{{}};
  REQUIRE(sim.wait_serving(10s));
  sidecar_process side{sim.endpoint()};
  auto id = instance_of(sim);
  REQUIRE(eventually([&] { return registered_as(side, id); }, 10s));
  REQUIRE(generate(sim, 10, 9));
  REQUIRE(eventually([&] { return index_matches(side, sim); }, 5s));
  auto inject = [&](const nlohmann::json& body) {
    return sim.post_debug("/debug/kv_inject", body.dump());
  };
  // Frames of the wrong shape, outside the sequence (topic "kv-events").
  REQUIRE(inject({{"frames_hex", {"6b762d6576656e7473", "0001"}}}));
  REQUIRE(inject({{"frames_hex", {"6b762d6576656e7473", "0000000001", "90"}}}));
  // A sequence far beyond the engine's history.
  REQUIRE(
    inject({{"frames_hex", {"6b762d6576656e7473", "00ffffffffffff00", "90"}}}));
  // Payloads in the sequence: not msgpack, truncated, an unknown event.
  REQUIRE(inject({{"payload_hex", "c1"}}));
  REQUIRE(inject({{"payload_hex", "93cb41d954fc40"}}));
  REQUIRE(inject({{"payload_hex", "93cb41d954fc40400000"
                                  "91"
                                  "91aa426c6f636b4d6f766564"
                                  "00"}}));
  REQUIRE(generate(sim, 500, 13));
  CHECK(eventually([&] { return index_matches(side, sim); }, 5s));
  auto rejected = [&](const std::string& reason) {
    return side
      .metric("outrider_kv_events_rejected_total{reason=\"" + reason +
              "\",rank=\"0\"}")
      .value_or(0);
  };
  CHECK(eventually([&] { return rejected("malformed_frame") >= 2; }, 5s));
  CHECK(rejected("sequence_ahead") >= 1);
  CHECK(rejected("malformed_msgpack") >= 2);
  CHECK(rejected("unknown_event_type") >= 1);
  CHECK(side.get("/ready") == 200);
  CHECK(registered_as(side, id));
}

TEST_CASE("on-kv-gap shutdown-engine stops the engine after lost history") {
  sim_process sim{{.buffer_steps = 3}};
  REQUIRE(sim.wait_serving(10s));
  auto dirs = std::make_shared<sidecar_dirs>();
  std::vector<std::string> flags{"--on-kv-gap", "shutdown-engine",
                                 "--engine-protocol", "vllm"};
  auto side = std::make_unique<sidecar_process>(sim.endpoint(), dirs, flags);
  auto id = instance_of(sim);
  REQUIRE(eventually([&] { return registered_as(*side, id); }, 10s));
  REQUIRE(generate(sim, 10, 9));
  side->proc->signal(SIGKILL);
  REQUIRE(side->proc->wait(5s));
  for (uint32_t i = 0; i < 8; ++i)
    REQUIRE(generate(sim, 1000 + 100 * i, 9));
  side = std::make_unique<sidecar_process>(sim.endpoint(), dirs, flags);
  // The engine is told to stop (it exits cleanly); the worker stays
  // unregistered meanwhile.
  auto code = sim.proc->wait(10s);
  REQUIRE(code);
  CHECK(*code == 0);
  CHECK(side->records().empty());
}

TEST_CASE("a batch lost with no replay to cover it resets the rank and the "
          "index goes on, never frozen") {
  sim_process sim{{.replay = false}};
  REQUIRE(sim.wait_serving(10s));
  sidecar_process side{sim.endpoint()};
  auto id = instance_of(sim);
  REQUIRE(eventually([&] { return registered_as(side, id); }, 10s));
  REQUIRE(generate(sim, 10, 9));
  REQUIRE(eventually([&] { return index_matches(side, sim); }, 5s));
  // The engine's next batch never arrives live.
  REQUIRE(sim.post_debug("/debug/kv_lose"));
  REQUIRE(generate(sim, 300, 9)); // its batch is the lost one
  REQUIRE(generate(sim, 600, 9)); // shows the gap
  // The gap is lost history: counted, the rank reset, and the stream goes
  // on — later prompts reach the index.
  CHECK(eventually(
    [&] {
      return side.metric("outrider_kv_gaps_unrecoverable_total{rank=\"0\"}") ==
             1.0;
    },
    5s));
  REQUIRE(generate(sim, 900, 13));
  CHECK(eventually(
    [&] {
      auto truth = truth_blocks(sim);
      auto mine = index_blocks(side);
      // Everything the index holds the engine holds, and the newest
      // prompt's blocks are there.
      size_t found = 0;
      for (const auto& [hash, b] : mine) {
        if (!truth.count(hash))
          return false;
        found += b.second.front() >= 900 ? 1 : 0;
      }
      return found >= 3;
    },
    5s));
  CHECK(side.get("/ready") == 200);
}

TEST_CASE("a KV message over --kv-max-message-bytes is refused and counted, "
          "and the index stays whole") {
  sim_process sim{{}};
  REQUIRE(sim.wait_serving(10s));
  sidecar_process side{
    sim.endpoint(), nullptr, {"--kv-max-message-bytes", "4096"}};
  auto id = instance_of(sim);
  REQUIRE(eventually([&] { return registered_as(side, id); }, 10s));
  REQUIRE(generate(sim, 10, 9));
  REQUIRE(eventually([&] { return index_matches(side, sim); }, 5s));
  // [topic, a sequence far ahead, 20 kB]: within the limit it would be
  // rejected as sequence_ahead; over it, it is refused as oversized before
  // anything else looks at it.
  nlohmann::json body{
    {"frames_hex",
     {"6b762d6576656e7473", "00ffffffffffff00", std::string(40000, 'a')}}};
  REQUIRE(sim.post_debug("/debug/kv_inject", body.dump()));
  for (uint32_t i = 0; i < 5; ++i)
    REQUIRE(generate(sim, 1000 + 100 * i, 9));
  CHECK(eventually([&] { return index_matches(side, sim); }, 10s));
  CHECK(side.metric("outrider_kv_events_rejected_total{reason=\"oversized_"
                    "frame\",rank=\"0\"}") == 1.0);
  CHECK_FALSE(side.metric(
    "outrider_kv_events_rejected_total{reason=\"sequence_ahead\",rank=\"0\"}"));
  CHECK(side.metric("outrider_kv_gaps_unrecoverable_total{rank=\"0\"}")
          .value_or(0) == 0);
  CHECK(side.get("/ready") == 200);
}

TEST_CASE("a sidecar whose store is garbage serves again, rebuilt from the "
          "engine") {
  namespace fs = std::filesystem;
  sim_process sim{{.num_blocks = 4096}};
  REQUIRE(sim.wait_serving(10s));
  auto dirs = std::make_shared<sidecar_dirs>();
  auto side = std::make_unique<sidecar_process>(sim.endpoint(), dirs);
  auto id = instance_of(sim);
  REQUIRE(eventually([&] { return registered_as(*side, id); }, 10s));
  for (uint32_t i = 0; i < 20; ++i)
    REQUIRE(generate(sim, 1 + 37 * i, 13));
  REQUIRE(eventually([&] { return index_matches(*side, sim); }, 10s));
  side->proc->signal(SIGTERM);
  REQUIRE(side->proc->wait(10s));
  side.reset();
  std::ofstream(fs::path(dirs->data.str()) / "CURRENT", std::ios::trunc)
    << "garbage\n";
  side = std::make_unique<sidecar_process>(sim.endpoint(), dirs);
  // Not a restart loop: ready again, the damage counted, the old store kept
  // beside the new one, the index whole again from the engine's replay.
  REQUIRE(eventually([&] { return registered_as(*side, id); }, 15s));
  CHECK(side->metric("outrider_index_corruption_total{kind=\"store\"}") == 1);
  CHECK(eventually([&] { return index_matches(*side, sim); }, 10s));
  fs::path data{dirs->data.str()};
  int aside = 0;
  for (const auto& e : fs::directory_iterator(data.parent_path()))
    if (e.path().filename().string().rfind(
          data.filename().string() + ".broken-", 0) == 0) {
      ++aside;
      fs::remove_all(e.path());
    }
  CHECK(aside == 1);
}

TEST_CASE("a replay that drips malformed frames is cut off and the index goes "
          "on, never stuck in replay") {
  sim_process sim{{}};
  REQUIRE(sim.wait_serving(10s));
  sidecar_process side{sim.endpoint()};
  auto id = instance_of(sim);
  REQUIRE(eventually([&] { return registered_as(side, id); }, 10s));
  REQUIRE(generate(sim, 10, 9));
  REQUIRE(eventually([&] { return index_matches(side, sim); }, 5s));
  // Every replay from now on is a drip of malformed frames with no end,
  // and the next batch is lost live, so a replay is needed.
  REQUIRE(sim.post_debug("/debug/kv_replay_drip"));
  REQUIRE(sim.post_debug("/debug/kv_lose"));
  REQUIRE(generate(sim, 300, 9)); // the lost batch
  auto started = std::chrono::steady_clock::now();
  // Live batches keep coming; the forwarder gives up on the drip, counts
  // it, and the gap becomes lost history within the unanswered limit.
  auto newest_indexed = [&](uint32_t first) {
    for (const auto& [hash, b] : index_blocks(side))
      if (b.second.front() >= first)
        return true;
    return false;
  };
  // One new prompt every 200 ms, each with its own first token (the
  // vocabulary has 32,000).
  uint32_t first = 600;
  CHECK(eventually(
    [&] {
      first = first >= 30000 ? 600 : first + 300;
      if (!generate(sim, first, 9))
        return false;
      std::this_thread::sleep_for(200ms);
      return newest_indexed(first);
    },
    30s));
  CHECK(std::chrono::steady_clock::now() - started < 30s);
  CHECK(side
          .metric("outrider_kv_events_rejected_total{reason=\"malformed_"
                  "replay_frame\",rank=\"0\"}")
          .value_or(0) >= 64);
  CHECK(side.metric("outrider_kv_gaps_unrecoverable_total{rank=\"0\"}")
          .value_or(0) >= 1);
  CHECK(side.get("/ready") == 200);
}

TEST_CASE("vLLM's KV event sources are found on KvTransfer, else on "
          "Control, whichever surface the engine serves") {
  for (const char* services : {"split", "old"}) {
    INFO(services);
    sim_process sim{
      {.extra = {"--protocol", "vllm", "--vllm-services", services}}};
    REQUIRE(sim.wait_serving(10s));
    sidecar_process side{sim.endpoint(),
                         std::make_shared<sidecar_dirs>(),
                         {"--engine-protocol", "vllm"}};
    auto id = instance_of(sim);
    REQUIRE(eventually([&] { return registered_as(side, id); }, 10s));
    REQUIRE(generate(sim, 10, 17));
    CHECK(eventually([&] { return index_matches(side, sim); }, 5s));
  }
}

TEST_CASE("vLLM's KV event sources are read from HTTP GET /kv_event_sources "
          "where its gRPC has no discovery") {
  sim_process sim{{.extra = {"--protocol", "vllm", "--vllm-services", "none"}}};
  REQUIRE(sim.wait_serving(10s));
  // Without the HTTP address the sidecar has no sources and never catches
  // up: not registered.
  {
    sidecar_process blind{sim.endpoint(),
                          std::make_shared<sidecar_dirs>(),
                          {"--engine-protocol", "vllm"}};
    REQUIRE(eventually([&] { return blind.get("/live") == 200; }, 10s));
    CHECK_FALSE(
      eventually([&] { return registered_as(blind, instance_of(sim)); }, 2s));
  }
  sidecar_process side{
    sim.endpoint(),
    std::make_shared<sidecar_dirs>(),
    {"--engine-http", "127.0.0.1:" + std::to_string(sim.debug)}};
  auto id = instance_of(sim);
  REQUIRE(eventually([&] { return registered_as(side, id); }, 10s));
  REQUIRE(generate(sim, 10, 17));
  CHECK(eventually([&] { return index_matches(side, sim); }, 5s));
}
