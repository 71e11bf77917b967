// End-to-end: what besides its tokens keys a prompt's KV on real engines
// (the LoRA adapter, the tenant's cache salt) reaches the router through
// the sidecars, and requests go where their own KV is, never to another
// adapter's or tenant's blocks of the same tokens (docs/wire.md,
// "extra_keys"). Simulated engines, sidecars and the router are real
// processes on loopback.
#include <catch2/catch.hpp>

#include "tests/e2e/router_cluster.hpp"
#include "vllm.grpc.pb.h"

using namespace outrider;
using namespace outrider::test;
using namespace std::chrono_literals;
using json = nlohmann::json;

namespace {

// Runs a prompt on an engine under an adapter and/or salt (vLLM's fields).
void warm_as(const sim_process& sim, const std::vector<uint32_t>& prompt,
             const std::string& lora, const std::string& salt) {
  auto stub = vllm::Inference::NewStub(sim.channel());
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 20s);
  vllm::GenerateRequest req;
  req.mutable_token_ids()->mutable_ids()->Add(prompt.begin(), prompt.end());
  req.mutable_stopping()->set_max_new_tokens(1);
  req.set_lora_name(lora);
  if (!salt.empty())
    req.mutable_kv()->set_cache_salt(salt);
  vllm::GenerateResponse resp;
  auto st = stub->Generate(&ctx, req, &resp);
  INFO(st.error_message());
  REQUIRE(st.ok());
}

// A completion through the router with extra body fields; the body.
json complete_with(cluster& c, const std::vector<uint32_t>& prompt,
                   json extra) {
  extra["prompt"] = prompt;
  extra["max_tokens"] = 2;
  auto [code, body] =
    http(c.http_port, "POST", "/v1/completions", extra.dump());
  INFO(body);
  REQUIRE(code == 200);
  return json::parse(body);
}

uint32_t cached_tokens(const json& r) {
  return r["usage"]["prompt_tokens_details"]["cached_tokens"].get<uint32_t>();
}

// The router's count of prompt blocks it took as cached where it placed.
double router_cached(cluster& c) {
  return c.router_metric("outrider_router_cached_blocks_total");
}

} // namespace

namespace {

// Two engines serving the adapters sql and chat, each listing them in its
// own protocol: the router learns them and keys each adapter's blocks apart.
void adapters_route_apart(const std::string& protocol) {
  cluster c{2,
            {.extra = {"--lora-modules", "sql,chat", "--protocol", protocol}}};
  auto prefix = tokens(3000, 64); // 16 blocks of 4
  warm_as(*c.sims[0], prefix, "sql", "");
  warm_as(*c.sims[1], prefix, "", "");
  REQUIRE(eventually(
    [&] { return c.router_metric("outrider_router_index_entries") >= 32; },
    10s));
  // The adapters are models the router lists and accepts.
  auto [code, models] = http(c.http_port, "GET", "/v1/models");
  REQUIRE(code == 200);
  CHECK(models.find("\"sql\"") != std::string::npos);
  // vLLM's gRPC reports no cached-token count: there, where a request ran
  // is read from the engines' caches (its first new block).
  bool counts = protocol != "vllm";
  auto ran_on = [&](const std::vector<uint32_t>& suffix) {
    std::vector<uint32_t> block(suffix.begin(), suffix.begin() + 4);
    int where = -1;
    for (int w = 0; w < 2; ++w) {
      auto cache = c.sims[w]->cache(0); // kept: the loop reads into it
      for (const auto& b : cache["blocks"])
        if (b["token_ids"].get<std::vector<uint32_t>>() == block)
          where = where == -1 ? w : 2;
    }
    return where;
  };
  for (uint32_t i = 0; i < 4; ++i) {
    auto suffix = tokens(20000 + 100 * i, 6);
    auto lora = complete_with(c, concat(prefix, suffix), {{"model", "sql"}});
    if (counts)
      CHECK(cached_tokens(lora) == 64);
    CHECK(lora["model"] == "sql");
    CHECK(ran_on(suffix) == 0);
    auto base = complete_with(c, concat(prefix, suffix), {});
    if (counts)
      CHECK(cached_tokens(base) == 64);
    CHECK(ran_on(suffix) == 2); // now on both
  }
  // The other adapter shares neither's blocks: no hit expected, none had.
  auto before = router_cached(c);
  auto chat =
    complete_with(c, concat(prefix, tokens(25000, 6)), {{"model", "chat"}});
  if (counts)
    CHECK(cached_tokens(chat) == 0);
  CHECK(router_cached(c) == before);
  // An adapter no worker serves is not a model here.
  auto [missing, body] =
    http(c.http_port, "POST", "/v1/completions",
         json{{"model", "nope"}, {"prompt", prefix}, {"max_tokens", 1}}.dump());
  CHECK(missing == 404);
  // The sidecars' indexes still equal their engines' caches.
  for (size_t i = 0; i < 2; ++i)
    CHECK(eventually(
      [&] { return index_matches_engine(*c.sides[i], *c.sims[i]); }, 10s));
}

} // namespace

TEST_CASE("an adapter's prompt goes to the worker holding the adapter's "
          "blocks, and the base model's prompt of the same tokens does not "
          "follow it") {
  adapters_route_apart("all"); // the sidecar speaks OpenEngine
}

TEST_CASE("adapters are learned from vLLM's own gRPC (Control.ListLoras) and "
          "keyed apart as on OpenEngine") {
  adapters_route_apart("vllm");
}

TEST_CASE("adapters are learned from SGLang's model cards: the router lists "
          "and serves them") {
  cluster c{1, {.extra = {"--lora-modules", "sql", "--protocol", "sglang"}}};
  auto [code, models] = http(c.http_port, "GET", "/v1/models");
  REQUIRE(code == 200);
  CHECK(models.find("\"sql\"") != std::string::npos);
  auto r = complete_with(c, tokens(3000, 12), {{"model", "sql"}});
  CHECK(r["model"] == "sql");
  auto [missing, body] = http(
    c.http_port, "POST", "/v1/completions",
    json{{"model", "nope"}, {"prompt", tokens(3000, 12)}, {"max_tokens", 1}}
      .dump());
  CHECK(missing == 404);
}

TEST_CASE("a tenant's prompt never lands on another tenant's blocks as a "
          "hit: cache_salt keys the whole chain") {
  cluster c{2};
  auto prefix = tokens(7000, 64);
  warm_as(*c.sims[0], prefix, "", "tenant-a");
  warm_as(*c.sims[1], prefix, "", "tenant-b");
  REQUIRE(eventually(
    [&] { return c.router_metric("outrider_router_index_entries") >= 32; },
    10s));
  for (uint32_t i = 0; i < 4; ++i) {
    auto suffix = tokens(26000 + 100 * i, 6);
    auto a =
      complete_with(c, concat(prefix, suffix), {{"cache_salt", "tenant-a"}});
    CHECK(cached_tokens(a) == 64);
    auto b =
      complete_with(c, concat(prefix, suffix), {{"cache_salt", "tenant-b"}});
    CHECK(cached_tokens(b) == 64);
  }
  // Unsalted, or another tenant's salt: the router expects no hit and the
  // engines serve none.
  for (const json& extra : {json::object(), json{{"cache_salt", "tenant-c"}}}) {
    auto before = router_cached(c);
    auto r = complete_with(c, concat(prefix, tokens(30000, 6)), extra);
    CHECK(cached_tokens(r) == 0);
    CHECK(router_cached(c) == before);
  }
  // A malformed salt is the client's error.
  auto [code, body] =
    http(c.http_port, "POST", "/v1/completions",
         json{{"cache_salt", 7}, {"prompt", prefix}, {"max_tokens", 1}}.dump());
  CHECK(code == 400);
  CHECK(body.find("invalid_cache_salt") != std::string::npos);
}

namespace {

// Warms prompts on an engine, then runs enough others through it that they
// leave its GPU (its LRU): with an offload tier, they stay there.
void push_off_gpu(const sim_process& sim,
                  const std::vector<std::vector<uint32_t>>& keep,
                  uint32_t first = 0) {
  for (const auto& p : keep)
    warm(sim, p);
  // 17 prompts of 16 blocks: more than the 256 GPU blocks.
  for (uint32_t i = first; i < first + 17; ++i)
    warm(sim, tokens(12000 + 80 * i, 64));
}

double placed_on(cluster& c, int worker) {
  return c.router_metric("outrider_router_placed_total{worker=\"worker-" +
                         std::to_string(worker) + "\",rank=\"0\"}");
}

} // namespace

TEST_CASE("offload tiers: a GPU copy beats a CPU copy, which beats none, "
          "and the CPU copy outlives its GPU eviction") {
  cluster c{3, {.extra = {"--kv-offload-blocks", "4096"}}};
  auto p = tokens(1000, 64), q = tokens(5000, 64);
  warm(*c.sims[0], p);
  push_off_gpu(*c.sims[1], {p, q});
  // Worker 1 holds p and q only in its CPU tier; its sidecar says so.
  auto truth = c.sims[1]->cache(0);
  size_t cpu = 0;
  for (const auto& b : truth["blocks"])
    cpu += b.value("medium", "GPU") == "CPU";
  CHECK(cpu >= 32);
  REQUIRE(eventually(
    [&] { return index_matches_engine(*c.sides[1], *c.sims[1]); }, 10s));
  REQUIRE(eventually(
    [&] { return index_matches_engine(*c.sides[0], *c.sims[0]); }, 10s));
  for (uint32_t i = 0; i < 3; ++i) {
    auto suffix = tokens(20000 + 100 * i, 6);
    auto before0 = placed_on(c, 0);
    auto r = c.complete(concat(p, suffix), 2);
    CHECK(placed_on(c, 0) == before0 + 1); // GPU over CPU
    CHECK(r["usage"]["prompt_tokens_details"]["cached_tokens"] == 64);
    auto before1 = placed_on(c, 1);
    auto before =
      c.router_metric("outrider_router_placed_blocks_total{of=\"offloaded\"}");
    auto s = c.complete(concat(q, suffix), 2);
    CHECK(placed_on(c, 1) == before1 + 1); // CPU over none
    // Loaded back from the tier, not computed.
    CHECK(s["usage"]["prompt_tokens_details"]["cached_tokens"] == 64);
    CHECK(c.router_metric(
            "outrider_router_placed_blocks_total{of=\"offloaded\"}") >=
          before + (i == 0 ? 16 : 0));
  }
  // No batch or event of the tier was refused on the way.
  for (const auto& side : c.sides)
    CHECK_FALSE(side
                  ->metric("outrider_kv_events_rejected_total{reason="
                           "\"bad_event\"}")
                  .value_or(0) > 0);
}

TEST_CASE("offload tiers: placeholders resolve through the GPU copy, hybrid "
          "groups and a store-only tier neither reject batches nor corrupt "
          "the index, and the router keeps a tier within its cap") {
  cluster c{
    3,
    {.extra = {"--kv-offload-blocks", "4096", "--kv-offload-events",
               "placeholder", "--kv-hybrid-groups", "--kv-offload-store-only"}},
    {"--kv-slot-cap", "320"}};
  auto q = tokens(5000, 64);
  push_off_gpu(*c.sims[1], {q});
  REQUIRE(eventually(
    [&] { return index_matches_engine(*c.sides[1], *c.sims[1]); }, 10s));
  // The placeholders named hashes the GPU stores had made known: q's CPU
  // copies are credited on worker 1.
  auto before1 = placed_on(c, 1);
  auto r = c.complete(concat(q, tokens(20000, 6)), 2);
  CHECK(placed_on(c, 1) == before1 + 1);
  CHECK(r["usage"]["prompt_tokens_details"]["cached_tokens"] == 64);
  for (const auto& side : c.sides)
    CHECK_FALSE(side
                  ->metric("outrider_kv_events_rejected_total{reason="
                           "\"bad_event\"}")
                  .value_or(0) > 0);
  // The sliding-window group's events were left out, and counted.
  CHECK(c.router_metric("outrider_router_index_skipped_blocks_total{reason="
                        "\"non_prefix_group\"}") > 0);
  // Its CPU tier grows past 320 blocks: the router keeps no more than that
  // of it (--kv-slot-cap), oldest first.
  push_off_gpu(*c.sims[1], {}, 17);
  REQUIRE(eventually(
    [&] { return index_matches_engine(*c.sides[1], *c.sims[1]); }, 10s));
  CHECK(c.router_metric(
          "outrider_router_index_skipped_blocks_total{reason=\"over_cap\"}") >
        0);
}

TEST_CASE("offload tiers: a REMOTE tier's copies are not credited to the "
          "worker that reports them") {
  cluster c{2,
            {.extra = {"--kv-offload-blocks", "4096", "--kv-offload-locality",
                       "remote"}}};
  auto q = tokens(5000, 64);
  push_off_gpu(*c.sims[1], {q});
  REQUIRE(eventually(
    [&] {
      return c.router_metric("outrider_router_index_skipped_blocks_total{"
                             "reason=\"remote_or_foreign\"}") >= 16;
    },
    10s));
  auto before =
    c.router_metric("outrider_router_placed_blocks_total{of=\"offloaded\"}");
  c.complete(concat(q, tokens(20000, 6)), 2);
  CHECK(c.router_metric(
          "outrider_router_placed_blocks_total{of=\"offloaded\"}") == before);
}

TEST_CASE("a store-only tier is held to --kv-slot-cap by the sidecar too: "
          "in its index, after a restart's recovery, oldest first") {
  sim_process sim{
    {.extra = {"--kv-offload-blocks", "4096", "--kv-offload-store-only"}}};
  REQUIRE(sim.wait_serving(10s));
  auto dirs = std::make_shared<sidecar_dirs>();
  std::vector<std::string> flags{"--kv-slot-cap", "100"};
  auto cpu_blocks = [](const sidecar_process& s) {
    size_t n = 0;
    for (const auto& b : s.index_blocks(0))
      for (const auto& m : b.value("media", nlohmann::json::array()))
        n += m == "CPU";
    return n;
  };
  auto evicted = [](const sidecar_process& s) {
    return s.metric("outrider_kv_tier_evictions_total").value_or(0);
  };
  {
    sidecar_process side{sim.endpoint(), dirs, flags};
    REQUIRE(eventually([&] { return side.get("/ready") == 200; }, 10s));
    push_off_gpu(sim, {}); // 272 blocks, every one written to CPU
    REQUIRE(eventually([&] { return evicted(side) >= 172; }, 10s));
    CHECK(cpu_blocks(side) == 100);
    // The newest stay: the last prompt's blocks are all there.
    auto last = tokens(12000 + 80 * 16, 64);
    size_t newest = 0;
    for (const auto& b : side.index_blocks(0))
      if (b["token_ids"][0].get<uint32_t>() >= last.front() &&
          b["token_ids"][0].get<uint32_t>() < last.front() + 64)
        newest += b["media"].dump().find("CPU") != std::string::npos;
    CHECK(newest == 16);
  }
  // The engine holds more than the cap; the sidecar's view stays bounded.
  size_t engine_cpu = 0;
  auto truth = sim.cache(0);
  for (const auto& b : truth["blocks"])
    engine_cpu += b.value("medium", "GPU") == "CPU";
  CHECK(engine_cpu >= 272);
  // Recovered from its store within the cap, and held there as it grows.
  sidecar_process again{sim.endpoint(), dirs, flags};
  REQUIRE(eventually([&] { return again.get("/ready") == 200; }, 10s));
  CHECK(cpu_blocks(again) == 100);
  push_off_gpu(sim, {}, 17);
  REQUIRE(eventually([&] { return evicted(again) >= 272; }, 10s));
  CHECK(cpu_blocks(again) == 100);
}
