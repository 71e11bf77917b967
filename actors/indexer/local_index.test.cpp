#include "actors/indexer/local_index.hpp"

#include <filesystem>
#include <fstream>
#include <random>

#include <catch2/catch.hpp>

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
          i->second.token_ids != info.token_ids)
        return false;
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
