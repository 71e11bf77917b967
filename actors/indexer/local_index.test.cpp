#include "actors/indexer/local_index.hpp"

#include <filesystem>
#include <fstream>
#include <random>

#include <catch2/catch.hpp>

#include "actors/indexer/index_records.hpp"
#include "actors/indexer/index_store.hpp"

using namespace outrider;
using namespace outrider::indexer;
namespace fs = std::filesystem;

namespace {

kv::block_stored stored(std::vector<uint64_t> hashes,
                        std::optional<uint64_t> parent, uint32_t bs = 2) {
  kv::block_stored s{std::move(hashes), parent, {}, bs};
  for (size_t i = 0; i < s.block_hashes.size() * bs; ++i)
    s.token_ids.push_back(static_cast<uint32_t>(s.block_hashes[0] + i));
  return s;
}

struct temp_dir {
  fs::path path;
  temp_dir() {
    static int n = 0;
    path = fs::temp_directory_path() /
           ("outrider-index-" + std::to_string(::getpid()) + "-" +
            std::to_string(n++));
  }
  ~temp_dir() { fs::remove_all(path); }
};

bool same(const local_index& a, const local_index& b) {
  for (const auto* x : {&a, &b})
    for (const auto& [rank, blocks] : x->ranks())
      if (a.blocks(rank) != b.blocks(rank))
        return false;
  for (const auto& [rank, blocks] : a.ranks())
    for (const auto& [h, info] : blocks) {
      auto& other = b.ranks().at(rank);
      auto i = other.find(h);
      if (i == other.end() || i->second.parent != info.parent ||
          i->second.token_ids != info.token_ids ||
          i->second.identity.lora != info.identity.lora ||
          i->second.identity.extra != info.identity.extra ||
          i->second.where.size() != info.where.size())
        return false;
      for (size_t w = 0; w < info.where.size(); ++w) {
        const auto &x = info.where[w], &y = i->second.where[w];
        if (!x.same_place(y) || x.spec_kind != y.spec_kind ||
            x.copies != y.copies)
          return false;
      }
    }
  return true;
}

} // namespace

TEST_CASE("the local index applies stores, removals and clears per rank") {
  local_index idx;
  auto st =
    idx.apply(0, {stored({1, 2, 3}, std::nullopt), kv::block_removed{{2, 99}}});
  CHECK(st.stored == 3);
  CHECK(st.removed == 1);
  CHECK(st.unknown_removal == 1);
  CHECK(idx.blocks(0) == 2);
  CHECK(idx.ranks().at(0).at(3).parent == std::optional<uint64_t>{2});
  CHECK(idx.ranks().at(0).at(3).token_ids == std::vector<uint32_t>{5, 6});
  st = idx.apply(1, {stored({7}, 5)});
  CHECK(st.unknown_parent == 1);
  CHECK(idx.blocks(1) == 1); // kept: the engine has it
  st = idx.apply(0, {kv::all_blocks_cleared{}});
  CHECK(st.cleared == 2);
  CHECK(idx.blocks(0) == 0);
  CHECK(idx.blocks(1) == 1);
}

TEST_CASE("a snapshot lists parents before children") {
  local_index idx;
  idx.apply(0, {stored({10, 11, 12}, std::nullopt), stored({20}, 11),
                stored({30}, 999)});
  auto events = idx.snapshot_events(0);
  REQUIRE(events.size() == 5);
  std::map<uint64_t, size_t> pos;
  for (size_t i = 0; i < events.size(); ++i)
    pos[std::get<kv::block_stored>(events[i]).block_hashes[0]] = i;
  CHECK(pos[10] < pos[11]);
  CHECK(pos[11] < pos[12]);
  CHECK(pos[11] < pos[20]);
  local_index rebuilt;
  rebuilt.apply(0, events);
  CHECK(same(idx, rebuilt));
}

TEST_CASE("the store recovers exactly what was applied") {
  temp_dir d;
  local_index model;
  std::mt19937_64 rng{42};
  {
    index_store store;
    REQUIRE_FALSE(store.open(d.path.string()));
    REQUIRE_FALSE(store.reset("engine-a"));
    std::vector<uint64_t> live;
    for (uint64_t seq = 0; seq < 300; ++seq) {
      int rank = static_cast<int>(rng() % 2);
      std::vector<kv::kv_event> evs;
      auto dice = rng() % 10;
      if (dice < 6) {
        uint64_t h = rng();
        std::optional<uint64_t> parent;
        if (!live.empty() && rng() % 2)
          parent = live[rng() % live.size()];
        evs.push_back(stored({h, h + 1}, parent));
        live.push_back(h + 1);
      } else if (dice < 9 && !live.empty()) {
        evs.push_back(kv::block_removed{{live[rng() % live.size()]}});
      } else if (dice == 9 && seq % 7 == 0) {
        evs.push_back(kv::all_blocks_cleared{});
      }
      model.apply(rank, evs);
      REQUIRE_FALSE(store.apply(rank, seq + 1, evs));
      if (seq % 97 == 96) // a snapshot now and then, the log after it
        REQUIRE_FALSE(store.compact(rank, model.ranks().at(rank), seq + 1));
    }
  }
  index_store again;
  REQUIRE_FALSE(again.open(d.path.string()));
  auto rec = again.load();
  CHECK(rec.instance_id == "engine-a");
  CHECK(rec.next_seq.size() == 2);
  CHECK(same(rec.index, model));
  CHECK(rec.index.total_blocks() == model.total_blocks());

  REQUIRE_FALSE(again.reset_rank(1, 5));
  auto after = again.load();
  CHECK(after.index.blocks(1) == 0);
  CHECK(after.index.blocks(0) == model.blocks(0));
  CHECK(after.next_seq[1] == 5);
  REQUIRE_FALSE(again.reset("engine-b"));
  auto fresh = again.load();
  CHECK(fresh.instance_id == "engine-b");
  CHECK(fresh.index.total_blocks() == 0);
  CHECK(fresh.next_seq.empty());
}

TEST_CASE("opening an unusable directory is an error, not a crash") {
  index_store store;
  CHECK(store.open("/proc/no/such/dir") == outrider::errc::io_error);
}

// A store whose files fail their checks is set aside and rebuilt, not an
// error: actors/indexer/index_store.test.cpp.

namespace {

// Events as today's engines send them: an adapter's blocks with extra keys,
// offloaded copies, a placeholder, a chunk re-announced, a REMOTE copy.
std::vector<kv::kv_event> rich_events() {
  auto lora = stored({100, 101}, std::nullopt);
  lora.lora_name = "sql";
  lora.lora_id = 2;
  lora.extra_keys = {{{kv::extra_key::kind::text, "sql", 0},
                      {kv::extra_key::kind::text, "tenant-a", 0}},
                     {{kv::extra_key::kind::text, "sql", 0},
                      {kv::extra_key::kind::media, "img", -1},
                      {kv::extra_key::kind::digest, std::string(32, 'd'), 0}}};
  lora.group_idx = 0;
  lora.spec_kind = "full_attention";
  lora.session_id = "s-1";
  auto cpu = lora;
  cpu.medium = kv::medium::cpu;
  auto chunk = stored({200, 201}, std::nullopt);
  chunk.medium = kv::medium::storage;
  chunk.locality = kv::locality::remote;
  chunk.ownership = "kvcr";
  kv::block_stored placeholder;
  placeholder.block_hashes = {100, 999};
  placeholder.medium = kv::medium::storage;
  kv::block_removed gpu_gone;
  gpu_gone.block_hashes = {101};
  return {lora, cpu, chunk, chunk, placeholder, gpu_gone};
}

} // namespace

TEST_CASE("the local index keeps what makes a block distinct and where its "
          "copies live") {
  local_index idx;
  auto st = idx.apply(0, rich_events());
  CHECK(st.placeholders == 1); // 999: known by its hash only
  const auto& b = idx.ranks().at(0);
  REQUIRE(b.count(100));
  CHECK(b.at(100).identity.lora == "sql");
  CHECK(b.at(100).identity.extra ==
        kv::block_extra{{kv::extra_key::kind::text, "tenant-a", 0}});
  CHECK(b.at(100).where.size() == 3); // GPU, CPU, storage (placeholder)
  CHECK(b.at(101).where.size() == 1); // its GPU copy went; CPU stays
  CHECK(b.at(101).where[0].medium == kv::medium::cpu);
  CHECK(b.at(200).where[0].copies == 2); // the chunk, announced twice
  CHECK(b.at(999).token_ids.empty());
  // The snapshot rebuilds the same index, copies and all.
  local_index rebuilt;
  rebuilt.apply(0, idx.snapshot_events(0));
  CHECK(same(idx, rebuilt));
  // A removal per copy; the block goes with the last.
  kv::block_removed rm;
  rm.block_hashes = {200};
  rm.medium = kv::medium::storage;
  rm.locality = kv::locality::remote;
  rm.ownership = "kvcr";
  idx.apply(0, {rm});
  CHECK(idx.ranks().at(0).count(200));
  idx.apply(0, {rm});
  CHECK_FALSE(idx.ranks().at(0).count(200));
}

TEST_CASE("the store keeps every field through its log, snapshots and a "
          "restart, and reads the first snapshot layout") {
  temp_dir d;
  local_index model;
  {
    index_store store;
    REQUIRE_FALSE(store.open(d.path.string()));
    REQUIRE_FALSE(store.reset("engine-a"));
    auto evs = rich_events();
    model.apply(0, evs);
    REQUIRE_FALSE(store.apply(0, 1, evs));
    model.apply(1, evs);
    REQUIRE_FALSE(store.apply(1, 1, evs));
    REQUIRE_FALSE(store.compact(1, model.ranks().at(1), 1));
  }
  index_store again;
  REQUIRE_FALSE(again.open(d.path.string()));
  auto rec = again.load();
  CHECK(same(rec.index, model));
  // The first layout: hash, parent flag and value, tokens; nothing else.
  std::string v;
  records::put_be(v, 7, 8);
  v.push_back(0);
  records::put_be(v, 0, 8);
  records::put_be(v, 2, 4);
  records::put_be(v, 5, 4);
  records::put_be(v, 6, 4);
  local_index old;
  REQUIRE(records::decode_snapshot(v, 0, old, true));
  REQUIRE(old.ranks().at(0).count(7));
  CHECK(old.ranks().at(0).at(7).token_ids == std::vector<uint32_t>{5, 6});
  CHECK(old.ranks().at(0).at(7).where.size() == 1);
  CHECK_FALSE(records::decode_snapshot(v, 0, old, false));
}

TEST_CASE("a hybrid model's groups hold their own copies under one hash") {
  local_index idx;
  auto full = stored({1, 2}, std::nullopt);
  full.group_idx = 0;
  full.spec_kind = "full_attention";
  auto window = full;
  window.group_idx = 1;
  window.spec_kind = "sliding_window";
  idx.apply(0, {full, window});
  kv::block_removed rm;
  rm.block_hashes = {1, 2};
  rm.group_idx = 1;
  idx.apply(0, {rm});
  REQUIRE(idx.blocks(0) == 2);
  const auto& w = idx.ranks().at(0).at(1).where;
  REQUIRE(w.size() == 1);
  CHECK(w[0].group_idx == std::optional<uint32_t>{0});
  CHECK(w[0].spec_kind == "full_attention");
  // The snapshot says so: a full-attention store per block.
  for (const auto& ev : idx.snapshot_events(0))
    CHECK(std::get<kv::block_stored>(ev).spec_kind == "full_attention");
}

TEST_CASE("removals that cannot change the index are left out before they "
          "are kept, and applying what is left gives the same index") {
  local_index idx;
  idx.apply(0, {stored({1, 2}, std::nullopt)});
  size_t dropped = 0;
  // Nothing to leave out: no copy.
  CHECK_FALSE(
    idx.without_noops(0, {kv::block_removed{{2}}}, &dropped).has_value());
  CHECK(dropped == 0);
  // Unknown removals go; a removal of a block stored earlier in the batch
  // stays; after a clear, the old blocks are unknown too.
  std::vector<kv::kv_event> batch{
    kv::block_removed{{2, 99, 98}}, stored({5}, 1),
    kv::block_removed{{5, 97}},     kv::all_blocks_cleared{},
    kv::block_removed{{1}},         kv::block_removed{{96}}};
  auto kept = idx.without_noops(0, batch, &dropped);
  REQUIRE(kept.has_value());
  CHECK(dropped == 5); // 99, 98, 97, 1 (after the clear), 96
  REQUIRE(kept->size() == 4);
  CHECK(std::get<kv::block_removed>((*kept)[0]).block_hashes ==
        std::vector<uint64_t>{2});
  CHECK(std::get<kv::block_removed>((*kept)[2]).block_hashes ==
        std::vector<uint64_t>{5});
  local_index a = idx, b = idx;
  a.apply(0, batch);
  b.apply(0, *kept);
  CHECK(a.blocks(0) == b.blocks(0));
  // A rank never seen: every removal is a no-op.
  CHECK(idx.without_noops(7, {kv::block_removed{{1}}}, &dropped)->empty());
}
