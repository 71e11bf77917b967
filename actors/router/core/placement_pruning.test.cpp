// The pruned search (placement_search.cpp) against the exhaustive one: on
// random fleets and on the Mooncake trace, at every decision the pruned
// search's choice costs what the exhaustive search's best costs. A copy of
// the placement, switched to the exhaustive search, decides from the very
// same state.
#include <fstream>
#include <random>
#include <type_traits>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "actors/router/core/placement_fixtures.hpp"

using namespace outrider;
using namespace outrider::router;
using namespace outrider::router::test;

static_assert(std::is_copy_constructible_v<placement>);

namespace {

struct fleet {
  manual_clock clock;
  placement p;
  std::vector<cluster::worker_record> workers;
  uint64_t engine_hash = 1;
  // What each store put where, for evictions.
  struct stored_run {
    std::string worker_id;
    int rank = 0;
    std::vector<uint64_t> hashes;
    kv::medium medium = kv::medium::gpu;
  };
  std::vector<stored_run> stores;
  std::mt19937_64 rng;
  size_t compared = 0, pruned_fewer = 0;

  fleet(router_config cfg, uint64_t seed)
    : p(std::move(cfg), clock.fn(), seed), rng(seed) {}

  // The engine of `w` rank `rank` caches the first `blocks` blocks of
  // `tokens` (a root-to-leaf chain of its own hashes).
  void store(const cluster::worker_record& w, int rank,
             const std::vector<uint32_t>& tokens, size_t blocks,
             kv::medium m = kv::medium::gpu) {
    kv::block_stored s;
    s.block_size = w.kv_block_size;
    s.medium = m;
    s.token_ids.assign(tokens.begin(),
                       tokens.begin() +
                         static_cast<long>(blocks * w.kv_block_size));
    for (size_t b = 0; b < blocks; ++b)
      s.block_hashes.push_back(engine_hash++);
    p.apply_events({w.worker_id, rank, false, {s}});
    stores.push_back({w.worker_id, rank, s.block_hashes, m});
  }

  // An engine evicts the tail of an earlier store (blocks a prediction
  // may cover: the prediction of a settled request goes with them).
  void evict_some() {
    if (stores.empty())
      return;
    auto& r = stores[rng() % stores.size()];
    if (r.hashes.empty())
      return;
    kv::block_removed rm;
    rm.medium = r.medium;
    auto keep = rng() % r.hashes.size();
    rm.block_hashes.assign(r.hashes.begin() + static_cast<long>(keep),
                           r.hashes.end());
    r.hashes.resize(keep);
    p.apply_events({r.worker_id, r.rank, false, {rm}});
  }

  // Decides `req` on a copy switched to the exhaustive search, then on
  // the placement itself, and checks they agree.
  route_decision decide(const route_request& req) {
    placement all = p;
    all.search_all(true);
    auto ref = all.place(req);
    auto got = p.place(req);
    REQUIRE(got.ok == ref.ok);
    REQUIRE(got.busy == ref.busy);
    REQUIRE(got.no_worker == ref.no_worker);
    if (got.ok) {
      INFO("prompt of " << got.prompt_blocks << " blocks, scored " << got.scored
                        << " of " << ref.scored);
      REQUIRE(got.cost == Approx(ref.cost).epsilon(1e-9).margin(1e-6));
      // On the same rank, the same run of cached blocks (the exhaustive
      // search reads it in its match; the pruned one walks the chosen
      // rank's blocks after choosing).
      if (got.slot == ref.slot)
        REQUIRE(got.overlap_blocks == ref.overlap_blocks);
      ++compared;
      pruned_fewer += got.scored < ref.scored;
    }
    return got;
  }
};

std::vector<uint32_t> random_prompt(std::mt19937_64& rng, uint32_t bs) {
  // One of 6 system prompts of 8 blocks, then 0-12 blocks from a small
  // alphabet (so that tails are shared too).
  std::vector<uint32_t> t;
  auto sys = rng() % 6;
  for (uint32_t i = 0; i < 8 * bs; ++i)
    t.push_back(static_cast<uint32_t>(1000 * (sys + 1) + i));
  auto tail = rng() % 13;
  for (uint32_t b = 0; b < tail; ++b) {
    auto v = static_cast<uint32_t>(rng() % 3);
    for (uint32_t i = 0; i < bs; ++i)
      t.push_back(v * 10 + b);
  }
  return t;
}

} // namespace

TEST_CASE("pruned placement: the same cost as scoring every rank, on random "
          "fleets",
          "[placement][pruning]") {
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    router_config cfg;
    cfg.selector = {1.0, 0.1, 0.25, seed % 2 ? 1.5 : 0.0, 0.0, 4};
    cfg.prediction_ttl = std::chrono::milliseconds{300};
    if (seed % 3 == 0)
      cfg.queue_threshold = 60;
    if (seed % 4 == 0)
      cfg.queue_kv_share = 0.01;
    fleet f{cfg, seed};
    auto& rng = f.rng;
    size_t n = std::vector<size_t>{3, 17, 70, 150}[seed % 4];
    for (size_t i = 0; i < n; ++i) {
      auto w = worker("w" + std::to_string(i));
      w.data_parallel_size = 1 + static_cast<uint32_t>(rng() % 2);
      w.role = rng() % 7 == 0   ? engine::worker_role::prefill
               : rng() % 7 == 0 ? engine::worker_role::decode
                                : engine::worker_role::aggregated;
      w.total_kv_blocks = rng() % 2 ? 0 : 40 + rng() % 400;
      if (rng() % 5 == 0)
        w.lora_adapters = {"ad"};
      f.p.add_worker(w);
      f.workers.push_back(w);
    }
    uint64_t note_key = 1;
    for (int step = 0; step < 400; ++step) {
      auto& w = f.workers[rng() % f.workers.size()];
      int rank = static_cast<int>(rng() % w.data_parallel_size);
      auto prompt = random_prompt(rng, 4);
      switch (rng() % 7) {
      case 0: // an engine caches a prefix (sometimes only offloaded)
        f.store(w, rank, prompt, 1 + rng() % (prompt.size() / 4),
                rng() % 4 == 0 ? kv::medium::cpu : kv::medium::gpu);
        break;
      case 1: { // another router booked a prompt there (predicted there)
        cluster::booking_note note;
        note.what = cluster::booking_note::op::add;
        note.router_id = "r2";
        note.key = note_key++;
        note.worker_id = w.worker_id;
        note.rank = rank;
        note.prefill_tokens = rng() % 200;
        note.decode_blocks = rng() % 50;
        route_request r;
        r.tokens = prompt;
        note.blocks = f.p.sequence_of(r);
        f.p.remote(note);
        break;
      }
      case 6:
        f.evict_some();
        break;
      case 2: // an engine reports its cache
        f.p.engine_reported(
          {w.worker_id, {{rank, rng() % 300, 300 + rng() % 100}}});
        break;
      default: { // a request
        route_request r;
        r.tokens = prompt;
        if (rng() % 8 == 0)
          r.exclude = {f.workers[rng() % f.workers.size()].worker_id};
        if (rng() % 10 == 0)
          r.identity.lora = "ad";
        if (rng() % 10 == 0)
          r.role = engine::worker_role::prefill;
        auto d = f.decide(r);
        if (d.ok && rng() % 3 == 0)
          f.p.release(d.key);
        else if (d.ok && rng() % 2 == 0)
          f.p.prefilled(d.key);
      }
      }
      f.clock.t += std::chrono::milliseconds{rng() % 40};
    }
    INFO("seed " << seed);
    // With the KV share most requests find every rank busy (compared too).
    CHECK(f.compared > (cfg.queue_kv_share > 0 ? 5u : 100u));
  }
}

TEST_CASE("pruned placement: the same cost as scoring every rank, on the "
          "Mooncake trace",
          "[placement][pruning]") {
  std::ifstream in{std::string{OUTRIDER_SOURCE_DIR} +
                   "/tests/data/mooncake_head.jsonl"};
  REQUIRE(in);
  router_config cfg;
  cfg.selector = {1.0, 0.1, 0.25, 1.5, 0.0, 16};
  cfg.queue_kv_share = 0.01;
  fleet f{cfg, 7};
  for (int i = 0; i < 16; ++i) {
    auto w = worker("w" + std::to_string(i));
    w.kv_block_size = 16;
    w.total_kv_blocks = 3000;
    f.p.add_worker(w);
    f.workers.push_back(w);
  }
  std::vector<uint64_t> running;
  std::string line;
  size_t hits = 0;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    // A trace block (512 tokens in the trace) is 16 tokens here, named
    // by its id: equal ids, equal blocks.
    std::vector<uint32_t> tokens;
    for (uint64_t id : j["hash_ids"])
      for (uint32_t i = 0; i < 16; ++i)
        tokens.push_back(static_cast<uint32_t>((id * 16 + i) % 32000));
    route_request r;
    r.tokens = tokens;
    auto d = f.decide(r);
    REQUIRE(d.ok);
    hits += d.overlap_blocks;
    // The chosen engine computes it and tells; it finishes a few
    // requests later.
    f.store(f.workers[d.slot], 0, tokens, tokens.size() / 16);
    f.p.prefilled(d.key);
    running.push_back(d.key);
    if (running.size() > 8) {
      f.p.release(running.front());
      running.erase(running.begin());
    }
    f.clock.t += std::chrono::milliseconds{50};
  }
  CHECK(f.compared == 600);
  CHECK(hits > 0);
  // On 16 workers the pruned search scores fewer than all most of the time.
  CHECK(f.pruned_fewer > f.compared / 2);
}

TEST_CASE("pruned placement: on a fleet of full caches, the same cost as "
          "scoring every rank, from a few ranks",
          "[placement][pruning]") {
  // Every rank's cache full but for a few: a prompt evicts wherever it
  // goes, except there. The eviction part of the cost is bounded by the
  // room of the ranks not scored yet (by_room_), so the search still ends
  // after a few ties instead of scoring every rank.
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    router_config cfg;
    cfg.selector = {1.0, 0.1, 0.25, 1.5, 0.0, 4};
    fleet f{cfg, seed};
    auto& rng = f.rng;
    const size_t n = 300;
    std::vector<uint32_t> system;
    for (uint32_t i = 0; i < 8 * 4; ++i)
      system.push_back(5000 + i);
    for (size_t i = 0; i < n; ++i) {
      auto w = worker("w" + std::to_string(i));
      w.total_kv_blocks = 24;
      f.p.add_worker(w);
      f.workers.push_back(w);
      // The system prompt on two thirds of them; all full (24 blocks held)
      // but every 100th, which keeps room for 6.
      if (i % 3)
        f.store(w, 0, system, 8);
      std::vector<uint32_t> own;
      for (uint32_t t = 0; t < 24 * 4; ++t)
        own.push_back(static_cast<uint32_t>(100000 + i * 1000 + t));
      f.store(w, 0, own, (i % 3 ? 16 : 24) - (i % 100 == 0 ? 6 : 0));
    }
    size_t few = 0;
    for (int step = 0; step < 200; ++step) {
      auto& w = f.workers[rng() % n];
      switch (rng() % 6) {
      case 0: // an engine reports its cache, its total a little smaller
        f.p.engine_reported({w.worker_id, {{0, 20, 20 + rng() % 5}}});
        break;
      case 1:
        f.evict_some();
        break;
      default: { // a request: the system prompt and a tail
        route_request r;
        r.tokens = system;
        auto tail = 4 + rng() % 8;
        for (uint32_t t = 0; t < tail * 4; ++t)
          r.tokens.push_back(static_cast<uint32_t>(rng() % 50));
        auto d = f.decide(r);
        REQUIRE(d.ok);
        few += d.scored <= 64;
        if (rng() % 2)
          f.p.release(d.key);
      }
      }
      f.clock.t += std::chrono::milliseconds{rng() % 100};
    }
    INFO("seed " << seed);
    CHECK(f.compared > 100);
    // Scored from a few ranks (ties, the roomiest, the deepest holders),
    // not from all 300.
    CHECK(few > f.compared * 9 / 10);
  }
}
