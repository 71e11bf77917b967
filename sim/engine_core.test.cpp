#include "sim/engine_core.hpp"

#include <map>

#include <catch2/catch.hpp>

using namespace outrider::sim;

namespace {

engine_config small_config(uint32_t blocks = 64, uint32_t block_size = 4) {
  engine_config c;
  c.num_blocks = blocks;
  c.block_size = block_size;
  c.max_num_seqs = 8;
  c.max_batched_tokens = 64;
  c.max_model_len = 4096;
  return c;
}

std::vector<uint32_t> tokens(uint32_t first, size_t n) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < n; ++i)
    out.push_back(first + static_cast<uint32_t>(i));
  return out;
}

engine_request request(std::string id, std::vector<uint32_t> prompt,
                       uint32_t max_tokens = 4) {
  engine_request r;
  r.id = std::move(id);
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  return r;
}

struct run_log {
  std::map<std::string, std::vector<uint32_t>> tokens;
  std::map<std::string, uint32_t> cached;
  std::vector<kv_event> events;
  std::vector<step_result> steps;
};

// Steps until idle (bounded).
run_log run(engine_core& core, int max_steps = 10000) {
  run_log log;
  for (int i = 0; i < max_steps && !core.idle(); ++i) {
    auto s = core.step();
    for (auto& o : s.outputs) {
      log.tokens[o.request_id].push_back(o.token);
      log.cached[o.request_id] = o.cached_tokens;
    }
    log.events.insert(log.events.end(), s.events.begin(), s.events.end());
    log.steps.push_back(std::move(s));
  }
  REQUIRE(core.idle());
  return log;
}

template <class T>
std::vector<T> events_of(const std::vector<kv_event>& evs) {
  std::vector<T> out;
  for (const auto& e : evs)
    if (auto* p = std::get_if<T>(&e))
      out.push_back(*p);
  return out;
}

} // namespace

TEST_CASE("outputs are the deterministic continuation of the context") {
  engine_core core{small_config()};
  auto prompt = tokens(100, 10);
  REQUIRE(core.submit(request("a", prompt, 10)));
  auto log = run(core);
  CHECK(log.tokens["a"] == continuation(prompt, 10));
  // Continuing elsewhere with the first 4 outputs appended gives the rest.
  engine_core other{small_config()};
  auto cont = prompt;
  cont.insert(cont.end(), log.tokens["a"].begin(), log.tokens["a"].begin() + 4);
  REQUIRE(other.submit(request("b", cont, 6)));
  auto log2 = run(other);
  CHECK(log2.tokens["b"] == std::vector<uint32_t>(log.tokens["a"].begin() + 4,
                                                  log.tokens["a"].end()));
}

TEST_CASE("a shared prefix is reused and only new blocks are stored") {
  engine_core core{small_config()};
  auto prompt = tokens(100, 18); // 4 full blocks of 4, and 2 tokens
  REQUIRE(core.submit(request("a", prompt, 1)));
  auto first = run(core);
  auto stored = events_of<block_stored>(first.events);
  REQUIRE(stored.size() == 1);
  CHECK(stored[0].block_hashes.size() == 4);
  CHECK_FALSE(stored[0].parent_block_hash);
  CHECK(stored[0].token_ids == tokens(100, 16));
  CHECK(first.cached["a"] == 0);

  auto b_prompt = tokens(100, 12); // the first 3 blocks
  auto tail = tokens(900, 8);
  b_prompt.insert(b_prompt.end(), tail.begin(), tail.end());
  REQUIRE(core.submit(request("b", b_prompt, 1)));
  auto second = run(core);
  CHECK(second.cached["b"] == 12);
  auto stored_b = events_of<block_stored>(second.events);
  REQUIRE(stored_b.size() == 1);
  CHECK(stored_b[0].block_hashes.size() == 2);
  REQUIRE(stored_b[0].parent_block_hash);
  CHECK(*stored_b[0].parent_block_hash == stored[0].block_hashes[2]);
  // Same tokens under another parent hash differently.
  CHECK(stored_b[0].block_hashes[0] != stored[0].block_hashes[3]);
}

TEST_CASE("idle cached blocks are evicted least recently used first") {
  engine_core core{small_config(6, 4)};
  // Three requests of one full block each, finished in order x, y, z.
  for (auto [id, first] : {std::pair{"x", 100u}, {"y", 200u}, {"z", 300u}}) {
    REQUIRE(core.submit(request(id, tokens(first, 5), 1)));
    run(core);
  }
  auto snapshot = core.cache_snapshot();
  CHECK(snapshot.size() == 3);
  // Touch y again: it becomes the most recently used.
  REQUIRE(core.submit(request("y2", tokens(200, 5), 1)));
  run(core);
  // A request that needs every block evicts x, then z, then y.
  REQUIRE(core.submit(request("big", tokens(1000, 22), 1)));
  auto log = run(core);
  auto removed = events_of<block_removed>(log.events);
  REQUIRE(removed.size() >= 2);
  std::map<uint64_t, uint32_t> first_token_of;
  for (const auto& b : snapshot)
    first_token_of[b.hash] = b.token_ids.front();
  CHECK(first_token_of[removed[0].block_hashes[0]] == 100);
  CHECK(first_token_of[removed[1].block_hashes[0]] == 300);
}

TEST_CASE("a finished request's blocks are evicted tail first: what is "
          "left of its prefix still hits") {
  engine_core core{small_config(6, 4)};
  // One request of four full blocks, finished: all four cached and idle.
  REQUIRE(core.submit(request("a", tokens(100, 17), 1)));
  run(core);
  REQUIRE(core.cache_snapshot().size() == 4);
  // A new prompt needing four blocks evicts two of them (two were free).
  REQUIRE(core.submit(request("b", tokens(5000, 13), 1)));
  run(core);
  // The evicted ones were a's last two: its first two still hit.
  REQUIRE(core.submit(request("a2", tokens(100, 17), 1)));
  auto again = run(core);
  CHECK(again.cached["a2"] == 8);
}

TEST_CASE("shared blocks are counted once and freed by the last user") {
  engine_core core{small_config(64, 4)};
  auto prompt = tokens(100, 16);
  REQUIRE(core.submit(request("a", prompt, 1)));
  run(core); // caches 4 blocks
  auto pa = prompt;
  pa.push_back(7);
  auto pb = prompt;
  pb.push_back(8);
  REQUIRE(core.submit(request("a2", pa, 8)));
  REQUIRE(core.submit(request("b2", pb, 2)));
  core.step(); // both admitted, sharing 4 cached blocks
  auto l = core.load();
  CHECK(l.running == 2);
  // 4 shared + one own block each.
  CHECK(l.used_blocks == 6);
  for (int i = 0; i < 3; ++i)
    core.step(); // b2 finishes after 2 tokens
  REQUIRE_FALSE(core.has_request("b2"));
  CHECK(core.load().used_blocks == 4 + 1); // a2: the prefix and its own block
  run(core);
  CHECK(core.load().used_blocks == 0);
}

TEST_CASE("when blocks run out the newest request is preempted") {
  auto cfg = small_config(12, 4);
  engine_core core{cfg};
  auto pa = tokens(100, 16);
  auto pb = tokens(500, 16);
  REQUIRE(core.submit(request("a", pa, 20)));
  REQUIRE(core.submit(request("b", pb, 20)));
  auto log = run(core);
  CHECK(core.preemptions() > 0);
  // Preemption costs time, not correctness.
  CHECK(log.tokens["a"] == continuation(pa, 20));
  CHECK(log.tokens["b"] == continuation(pb, 20));
}

TEST_CASE("prefill is chunked by the token budget") {
  auto cfg = small_config(256, 4);
  cfg.max_batched_tokens = 32;
  engine_core core{cfg};
  REQUIRE(core.submit(request("a", tokens(1, 80), 1)));
  auto s1 = core.step();
  CHECK(s1.prefill_tokens == 32);
  CHECK(s1.outputs.empty());
  auto s2 = core.step();
  CHECK(s2.prefill_tokens == 32);
  auto s3 = core.step();
  CHECK(s3.prefill_tokens == 16);
  REQUIRE(s3.outputs.size() == 1);
  CHECK(s3.outputs[0].finished == finish_reason::length);
}

TEST_CASE("no more than max_num_seqs run at once") {
  auto cfg = small_config(256, 4);
  cfg.max_num_seqs = 2;
  engine_core core{cfg};
  for (int i = 0; i < 5; ++i)
    REQUIRE(
      core.submit(request("r" + std::to_string(i),
                          tokens(10 * static_cast<uint32_t>(i) + 1, 3), 5)));
  core.step();
  CHECK(core.load().running == 2);
  CHECK(core.load().waiting == 3);
  run(core);
}

// The order in which requests get their first token, one running at a
// time: three submitted together after the first.
std::vector<std::string> first_token_order(bool priority_scheduling) {
  auto cfg = small_config(256, 4);
  cfg.max_num_seqs = 1;
  cfg.priority_scheduling = priority_scheduling;
  engine_core core{cfg};
  auto busy = request("busy", tokens(1, 8), 1);
  REQUIRE(core.submit(busy));
  std::vector<std::string> order;
  for (const auto& o : core.step().outputs) // "busy" runs first
    order.push_back(o.request_id);
  int32_t pri = 0;
  for (const char* id : {"cold", "warm", "colder"}) {
    auto r = request(id, tokens(100 + static_cast<uint32_t>(id[0]), 8), 1);
    r.priority = std::string(id) == "warm" ? -1 : pri++;
    REQUIRE(core.submit(r));
  }
  for (int i = 0; i < 100 && !core.idle(); ++i)
    for (const auto& o : core.step().outputs)
      order.push_back(o.request_id);
  return order;
}

TEST_CASE("priority scheduling admits lower priority values first, in "
          "arrival order among equals, and fcfs ignores priorities") {
  CHECK(first_token_order(true) ==
        std::vector<std::string>{"busy", "warm", "cold", "colder"});
  CHECK(first_token_order(false) ==
        std::vector<std::string>{"busy", "cold", "warm", "colder"});
}

TEST_CASE("step time follows the model") {
  auto cfg = small_config(1000, 4);
  cfg.max_batched_tokens = 8192;
  engine_core core{cfg};
  REQUIRE(core.submit(request("a", tokens(1, 400), 3)));
  auto s = core.step();
  CHECK(s.duration_ms == Approx(cfg.timing.prefill_ms(400)));
  auto d = core.step();
  CHECK(d.decode_tokens == 1);
  double u = static_cast<double>(core.load().used_blocks) / 1000;
  CHECK(d.duration_ms == Approx(cfg.timing.decode_ms(u)));
  CHECK(cfg.timing.prefill_ms(1000) == Approx(4.21e-7 * 1e6 + 15.18 + 16.5));
  CHECK(cfg.timing.decode_ms(0.5) == Approx(-25.74 * 0.25 + 27.005 + 5.74));
  CHECK(cfg.timing.decode_ms(5.0) >= 1.0);
}

TEST_CASE("abort frees the request's blocks") {
  engine_core core{small_config()};
  REQUIRE(core.submit(request("a", tokens(1, 30), 100)));
  core.step();
  CHECK(core.load().used_blocks > 0);
  CHECK(core.abort("a"));
  CHECK_FALSE(core.abort("a"));
  CHECK(core.load().used_blocks == 0);
  CHECK(core.idle());
}

TEST_CASE("requests that can never run are refused with a reason") {
  engine_core core{small_config(8, 4)};
  std::string why;
  CHECK_FALSE(core.submit(request("e", {}, 1), &why));
  CHECK(why == "the prompt is empty");
  CHECK_FALSE(core.submit(request("z", tokens(1, 3), 0), &why));
  CHECK(why == "max_tokens must be at least 1");
  CHECK_FALSE(core.submit(request("big", tokens(1, 40), 1), &why));
  CHECK(why == "the request needs more KV blocks than the engine has");
  CHECK_FALSE(core.submit(request("v", {1, 99999}, 1), &why));
  CHECK(why == "token id 99999 is outside the vocabulary of 32000");
  REQUIRE(core.submit(request("d", tokens(1, 3), 1)));
  CHECK_FALSE(core.submit(request("d", tokens(1, 3), 1), &why));
  CHECK(why == "duplicate request id 'd'");
}

TEST_CASE("a prefix-cache reset forgets every cached block") {
  engine_core core{small_config()};
  REQUIRE(core.submit(request("a", tokens(1, 17), 1)));
  run(core);
  CHECK(core.cache_snapshot().size() == 4);
  core.reset_prefix_cache();
  CHECK(core.cache_snapshot().empty());
  auto s = core.step();
  REQUIRE(s.events.size() == 1);
  CHECK(std::holds_alternative<all_blocks_cleared>(s.events[0]));
  REQUIRE(core.submit(request("b", tokens(1, 17), 1)));
  CHECK(run(core).cached["b"] == 0);
}
