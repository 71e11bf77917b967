// An offload tier held to its cap, oldest first, by removals that travel
// with the batch; the GPU tier and the engine's own events untouched.
#include "actors/indexer/tier_bound.hpp"

#include <catch2/catch.hpp>

using namespace outrider;
using namespace outrider::indexer;

namespace {

kv::block_stored store(uint64_t hash, kv::medium m) {
  kv::block_stored s;
  s.block_hashes = {hash};
  s.token_ids = {static_cast<uint32_t>(hash), 7};
  s.block_size = 2;
  s.medium = m;
  return s;
}

// What the indexer does with a batch: evictions appended, applied, noted.
size_t feed(local_index& idx, tier_bound& bound,
            std::vector<kv::kv_event> events) {
  auto ev = bound.evictions(idx, 0, events);
  size_t n = 0;
  for (const auto& e : ev)
    n += std::get<kv::block_removed>(e).block_hashes.size();
  events.insert(events.end(), ev.begin(), ev.end());
  idx.apply(0, events);
  bound.note(idx, 0, events);
  return n;
}

bool in(const local_index& idx, uint64_t h, kv::medium m) {
  const auto& blocks = idx.ranks().at(0);
  auto it = blocks.find(h);
  if (it == blocks.end())
    return false;
  for (const auto& r : it->second.where)
    if (r.medium == m)
      return true;
  return false;
}

} // namespace

TEST_CASE("tier bound: a store-only CPU tier keeps its newest blocks, the "
          "GPU tier is left alone") {
  local_index idx;
  tier_bound bound{4};
  size_t evicted = 0;
  for (uint64_t h = 1; h <= 10; h += 2)
    evicted += feed(idx, bound,
                    {store(h, kv::medium::cpu), store(h + 1, kv::medium::cpu),
                     store(100 + h, kv::medium::gpu)});
  CHECK(evicted == 6);
  CHECK(bound.held(0, kv::medium::cpu) == 4);
  for (uint64_t h = 1; h <= 10; ++h)
    CHECK(in(idx, h, kv::medium::cpu) == (h > 6));
  for (uint64_t h = 1; h <= 10; h += 2)
    CHECK(in(idx, 100 + h, kv::medium::gpu)); // five GPU blocks, all kept
  CHECK(idx.blocks(0) == 4 + 5);
}

TEST_CASE("tier bound: an eviction takes the tier's copies only, every "
          "counted copy, and never a block the batch names") {
  local_index idx;
  tier_bound bound{2};
  // Block 1 on GPU and twice in CPU (chunk events re-announce it).
  feed(idx, bound,
       {store(1, kv::medium::gpu), store(1, kv::medium::cpu),
        store(1, kv::medium::cpu), store(2, kv::medium::cpu)});
  REQUIRE(bound.held(0, kv::medium::cpu) == 2);
  // Block 3 arrives: 1 is oldest; its two CPU copies go, its GPU copy stays.
  CHECK(feed(idx, bound, {store(3, kv::medium::cpu)}) == 2);
  CHECK_FALSE(in(idx, 1, kv::medium::cpu));
  CHECK(in(idx, 1, kv::medium::gpu));
  CHECK(in(idx, 2, kv::medium::cpu));
  // A batch that re-stores 2 (oldest now) and adds 4: 3 goes instead, and
  // the tier is back at its cap.
  CHECK(feed(idx, bound,
             {store(2, kv::medium::cpu), store(4, kv::medium::cpu)}) >= 1);
  CHECK(in(idx, 2, kv::medium::cpu));
  CHECK(in(idx, 4, kv::medium::cpu));
  CHECK_FALSE(in(idx, 3, kv::medium::cpu));
  CHECK(bound.held(0, kv::medium::cpu) == 2);
  // The spared block kept its place in line: it is the next to go.
  CHECK(feed(idx, bound, {store(5, kv::medium::cpu)}) == 2); // 2 copies
  CHECK_FALSE(in(idx, 2, kv::medium::cpu));
  CHECK(in(idx, 4, kv::medium::cpu));
}

TEST_CASE("tier bound: removals, clears and a rebuild keep the count true") {
  local_index idx;
  tier_bound bound{3};
  feed(idx, bound,
       {store(1, kv::medium::cpu), store(2, kv::medium::cpu),
        store(3, kv::medium::storage)});
  kv::block_removed rm;
  rm.block_hashes = {1};
  rm.medium = kv::medium::cpu;
  CHECK(feed(idx, bound, {rm}) == 0);
  CHECK(bound.held(0, kv::medium::cpu) == 1);
  CHECK(bound.held(0, kv::medium::storage) == 1);
  // Two more CPU blocks fit (cap 3 per tier, not across tiers).
  CHECK(feed(idx, bound,
             {store(4, kv::medium::cpu), store(5, kv::medium::cpu)}) == 0);
  CHECK(feed(idx, bound, {kv::all_blocks_cleared{}}) == 0);
  CHECK(bound.held(0, kv::medium::cpu) == 0);
  // After recovery the bound is rebuilt from the index alone.
  feed(idx, bound, {store(6, kv::medium::cpu), store(7, kv::medium::cpu)});
  tier_bound fresh{1};
  fresh.rebuild(idx, 0);
  CHECK(fresh.held(0, kv::medium::cpu) == 2);
  CHECK(feed(idx, fresh, {store(8, kv::medium::cpu)}) == 2);
  CHECK(fresh.held(0, kv::medium::cpu) == 1);
  CHECK(in(idx, 8, kv::medium::cpu));
}

TEST_CASE("tier bound: churn does not grow its memory past what is held") {
  local_index idx;
  tier_bound bound{1000};
  for (uint64_t round = 0; round < 50; ++round) {
    std::vector<kv::kv_event> batch;
    kv::block_removed rm;
    rm.medium = kv::medium::cpu;
    for (uint64_t i = 0; i < 100; ++i) {
      batch.push_back(store(round * 1000 + i, kv::medium::cpu));
      if (round > 0)
        rm.block_hashes.push_back((round - 1) * 1000 + i);
    }
    if (round > 0)
      batch.push_back(rm);
    feed(idx, bound, batch);
  }
  CHECK(bound.held(0, kv::medium::cpu) == 100);
  CHECK(bound.order_entries(0, kv::medium::cpu) <= 2 * 1024);
}
