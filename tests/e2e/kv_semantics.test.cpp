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

TEST_CASE("an adapter's prompt goes to the worker holding the adapter's "
          "blocks, and the base model's prompt of the same tokens does not "
          "follow it") {
  cluster c{2, {.extra = {"--lora-modules", "sql,chat"}}};
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
  for (uint32_t i = 0; i < 4; ++i) {
    auto suffix = tokens(20000 + 100 * i, 6);
    auto lora = complete_with(c, concat(prefix, suffix), {{"model", "sql"}});
    CHECK(cached_tokens(lora) == 64);
    CHECK(lora["model"] == "sql");
    auto base = complete_with(c, concat(prefix, suffix), {});
    CHECK(cached_tokens(base) == 64);
  }
  // The other adapter shares neither's blocks: no hit expected, none had.
  auto before = router_cached(c);
  auto chat =
    complete_with(c, concat(prefix, tokens(25000, 6)), {{"model", "chat"}});
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
