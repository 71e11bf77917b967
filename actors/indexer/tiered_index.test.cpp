#include "actors/indexer/tiered_index.hpp"

#include <catch2/catch.hpp>

#include "cluster/kv/block_hash.hpp"

using namespace outrider;
using namespace outrider::indexer;

namespace {

constexpr uint32_t bs = 4;

// Eight tokens: two blocks.
const std::vector<uint32_t> prompt{1, 2, 3, 4, 5, 6, 7, 8};

// A store of the prompt's two blocks as engine hashes h, h+1.
kv::block_stored store(uint64_t h, kv::medium m = kv::medium::gpu) {
  kv::block_stored s;
  s.block_hashes = {h, h + 1};
  s.token_ids = prompt;
  s.block_size = bs;
  s.medium = m;
  return s;
}

std::vector<uint64_t> keys(const kv::prompt_identity& id = {}) {
  return kv::sequence_keys(prompt.data(), prompt.size(), bs, id);
}

// The slot's entry of a find, or a zero one.
tiered_overlap of(const tiered_index& idx, slot_id slot,
                  const std::vector<uint64_t>& k) {
  for (auto o : idx.find(k))
    if (o.slot == slot)
      return o;
  return {slot, 0, 0, 0};
}

} // namespace

TEST_CASE("an adapter's blocks match its prompts only, by name or by id") {
  tiered_index idx(kv::block_hash_seed);
  auto lora = store(10);
  lora.lora_name = "sql";
  lora.extra_keys = {{{kv::extra_key::kind::text, "sql", 0}},
                     {{kv::extra_key::kind::text, "sql", 0}}};
  idx.apply(0, {lora});
  idx.apply(1, {store(20)}); // the base model
  auto by_id = store(30);
  by_id.lora_id = 4;
  idx.apply(2, {by_id});
  kv::prompt_identity sql{"sql", "", {}};
  CHECK(of(idx, 0, keys(sql)).gpu_blocks == 2);
  CHECK(of(idx, 1, keys(sql)).gpu_blocks == 0);
  CHECK(of(idx, 0, keys()).gpu_blocks == 0);
  CHECK(of(idx, 1, keys()).gpu_blocks == 2);
  CHECK(of(idx, 2, keys()).gpu_blocks == 0);
  CHECK(of(idx, 2, keys({"#lora-id:4", "", {}})).gpu_blocks == 2);
}

TEST_CASE("a tenant's salt keys its whole chain, vLLM's or SGLang's way") {
  tiered_index idx(kv::block_hash_seed);
  auto vllm = store(10);
  vllm.extra_keys = {{{kv::extra_key::kind::text, "tenant-a", 0}}, {}};
  idx.apply(0, {vllm});
  auto sglang = store(20);
  sglang.cache_salt = "tenant-a";
  idx.apply(1, {sglang});
  idx.apply(2, {store(30)});
  kv::prompt_identity a{"", "tenant-a", {}};
  kv::prompt_identity b{"", "tenant-b", {}};
  CHECK(of(idx, 0, keys(a)).gpu_blocks == 2);
  CHECK(of(idx, 1, keys(a)).gpu_blocks == 2);
  CHECK(of(idx, 2, keys(a)).gpu_blocks == 0);
  for (slot_id s : {0u, 1u})
    CHECK(of(idx, s, keys(b)).gpu_blocks == 0);
  CHECK(of(idx, 0, keys()).gpu_blocks == 0);
  CHECK(of(idx, 2, keys()).gpu_blocks == 2);
}

TEST_CASE("prompts differing only in an image match up to the image's block") {
  tiered_index idx(kv::block_hash_seed);
  // An image spanning tokens 5-6: in block 1, at offset 1.
  auto s = store(10);
  s.extra_keys = {{}, {{kv::extra_key::kind::media, "img-cat", 1}}};
  idx.apply(0, {s});
  kv::prompt_identity cat{"", "", {{"img-cat", 5, 2}}};
  kv::prompt_identity dog{"", "", {{"img-dog", 5, 2}}};
  CHECK(of(idx, 0, keys(cat)).gpu_blocks == 2);
  CHECK(of(idx, 0, keys(dog)).gpu_blocks == 1);
  CHECK(of(idx, 0, keys()).gpu_blocks == 1);
  // An item that began in an earlier block keys it with a negative offset.
  kv::prompt_identity wide{"", "", {{"img-wide", 2, 4}}};
  auto k = keys(wide);
  kv::block_identity second{"", {{kv::extra_key::kind::media, "img-wide", -2}}};
  CHECK(k[1] == kv::block_key(prompt.data() + 4, bs, second, k[0]));
}

TEST_CASE("tiers: GPU beats CPU beats none, a GPU eviction leaves the CPU "
          "copy, storage counts least") {
  tiered_index idx(kv::block_hash_seed);
  idx.apply(0, {store(10)});
  idx.apply(1, {store(20), store(20, kv::medium::cpu)});
  idx.apply(2, {store(30, kv::medium::storage)});
  kv::block_removed gone;
  gone.block_hashes = {20, 21};
  idx.apply(1, {gone}); // GPU copy evicted
  auto k = keys();
  auto gpu = of(idx, 0, k), cpu = of(idx, 1, k), disk = of(idx, 2, k),
       none = of(idx, 3, k);
  CHECK(gpu.credit == 2.0);
  CHECK(cpu.gpu_blocks == 0);
  CHECK(cpu.any_blocks == 2);
  CHECK(cpu.credit == Approx(1.6));
  CHECK(disk.credit == Approx(0.5));
  CHECK(none.credit == 0);
  CHECK(gpu.credit > cpu.credit);
  CHECK(cpu.credit > disk.credit);
  // The CPU copy goes with its own removal.
  gone.medium = kv::medium::cpu;
  idx.apply(1, {gone});
  CHECK(of(idx, 1, k).credit == 0);
}

TEST_CASE("REMOTE and foreign-owned copies are not credited unless asked") {
  for (bool credit : {false, true}) {
    tier_policy p;
    p.credit_remote = p.credit_foreign = credit;
    tiered_index idx(kv::block_hash_seed, p);
    auto remote = store(10, kv::medium::storage);
    remote.locality = kv::locality::remote;
    auto owned = store(20, kv::medium::cpu);
    owned.ownership = "kvcr";
    idx.apply(0, {remote});
    idx.apply(1, {owned});
    CHECK((of(idx, 0, keys()).credit > 0) == credit);
    CHECK((of(idx, 1, keys()).credit > 0) == credit);
    CHECK((idx.stats().not_credited == 4) == !credit);
  }
}

TEST_CASE("blocks of sliding-window groups serve no prefix, nor do their "
          "removals touch the full-attention group's") {
  tiered_index idx(kv::block_hash_seed);
  auto full = store(10);
  full.group_idx = 0;
  full.spec_kind = "full_attention";
  auto window = store(10); // vLLM's event hashes are the same per group
  window.group_idx = 1;
  window.spec_kind = "sliding_window";
  idx.apply(0, {full, window});
  kv::block_removed rm;
  rm.block_hashes = {10, 11};
  rm.group_idx = 1;
  idx.apply(0, {rm});
  CHECK(of(idx, 0, keys()).gpu_blocks == 2);
  CHECK(idx.stats().other_groups == 4);
  auto mamba = store(50);
  mamba.spec_kind = "mamba";
  idx.apply(1, {mamba});
  CHECK(of(idx, 1, keys()).gpu_blocks == 0);
}

TEST_CASE("placeholders resolve through a known hash, unknown ones are "
          "counted and kept out") {
  tiered_index idx(kv::block_hash_seed);
  idx.apply(0, {store(10)});
  kv::block_stored ph;
  ph.block_hashes = {10, 11, 99};
  ph.medium = kv::medium::cpu;
  REQUIRE(ph.tokenless());
  idx.apply(0, {ph});
  CHECK(idx.stats().placeholders_unresolved == 1);
  CHECK(idx.tier(kv::medium::cpu).held(0) == 2);
  kv::block_removed gpu_gone;
  gpu_gone.block_hashes = {10, 11};
  idx.apply(0, {gpu_gone});
  CHECK(of(idx, 0, keys()).credit == Approx(1.6));
}

TEST_CASE("chunk events re-announcing a prefix are reference-counted") {
  tiered_index idx(kv::block_hash_seed);
  // Two chunks sharing block 10: each announces it.
  idx.apply(0, {store(10, kv::medium::cpu), store(10, kv::medium::cpu)});
  CHECK(idx.tier(kv::medium::cpu).entries() == 2);
  kv::block_removed rm;
  rm.block_hashes = {10, 11};
  rm.medium = kv::medium::cpu;
  idx.apply(0, {rm});
  CHECK(of(idx, 0, keys()).any_blocks == 2); // the other chunk holds it
  idx.apply(0, {rm});
  CHECK(of(idx, 0, keys()).any_blocks == 0);
  CHECK(idx.tier(kv::medium::cpu).held(0) == 0);
  // GPU re-announcements (vLLM's full report mode) count once.
  idx.apply(1, {store(20), store(20)});
  kv::block_removed gpu;
  gpu.block_hashes = {20, 21};
  idx.apply(1, {gpu});
  CHECK(idx.held(1) == 0);
}

TEST_CASE("a store-only publisher's slot stays within its cap, newest kept") {
  tiered_index idx(kv::block_hash_seed);
  idx.set_cap(0, kv::medium::cpu, 10);
  for (uint32_t i = 0; i < 1000; ++i) {
    kv::block_stored s;
    s.block_hashes = {1000 + i};
    s.token_ids = {i, i, i, i};
    s.block_size = bs;
    s.medium = kv::medium::cpu;
    idx.apply(0, {s});
    REQUIRE(idx.tier(kv::medium::cpu).held(0) <= 10);
  }
  CHECK(idx.tier(kv::medium::cpu).held(0) == 10);
  CHECK(idx.tier(kv::medium::cpu).stats().evicted == 990);
  std::vector<uint32_t> last{999, 999, 999, 999};
  auto k = kv::sequence_hashes(last.data(), last.size(), bs);
  CHECK(of(idx, 0, k).any_blocks == 1);
  std::vector<uint32_t> first{0, 0, 0, 0};
  CHECK(of(idx, 0, kv::sequence_hashes(first.data(), first.size(), bs))
          .any_blocks == 0);
}
