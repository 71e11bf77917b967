// The store against damaged files: real RocksDB directories, damaged the
// way disks and operators damage them. Whatever happens, the store never
// lies: a rank is either whole (every batch before its next sequence) or
// reset (no blocks, sequence 0), and a store that cannot be opened is set
// aside instead of failing forever.
#include "actors/indexer/index_store.hpp"

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include <catch2/catch.hpp>

using namespace outrider;
using namespace outrider::indexer;
namespace fs = std::filesystem;

namespace {

struct temp_store_dir {
  fs::path root;
  fs::path dir;
  temp_store_dir() {
    static int n = 0;
    root = fs::temp_directory_path() /
           ("outrider-store-" + std::to_string(::getpid()) + "-" +
            std::to_string(n++));
    fs::create_directories(root);
    dir = root / "data";
  }
  ~temp_store_dir() { fs::remove_all(root); }
  bool set_aside() const {
    for (const auto& e : fs::directory_iterator(root))
      if (e.path().filename().string().rfind("data.broken-", 0) == 0)
        return true;
    return false;
  }
};

// Batch `seq` of `rank` stores one block whose hash is rank * 1e6 + seq.
std::vector<kv::kv_event> batch(int rank, uint64_t seq) {
  kv::block_stored s;
  s.block_hashes = {static_cast<uint64_t>(rank) * 1000000 + seq};
  s.block_size = 4;
  s.token_ids = {1, 2, 3, static_cast<uint32_t>(seq)};
  return {s};
}

void fill(const fs::path& dir, uint64_t batches, bool flush) {
  index_store st;
  REQUIRE_FALSE(st.open(dir.string()));
  REQUIRE_FALSE(st.reset("instance-A"));
  for (int rank : {0, 1})
    for (uint64_t seq = 0; seq < batches; ++seq)
      REQUIRE_FALSE(st.apply(rank, seq + 1, batch(rank, seq)));
  if (flush)
    REQUIRE_FALSE(st.flush());
}

// Whole or reset, nothing in between.
void check_truthful(const recovered_state& rec) {
  for (int rank : {0, 1}) {
    auto next = rec.next_seq.count(rank) ? rec.next_seq.at(rank) : 0;
    INFO("rank " << rank << ": next sequence " << next << ", "
                 << rec.index.blocks(rank) << " blocks");
    CHECK(rec.index.blocks(rank) == next);
    if (rec.index.ranks().count(rank))
      for (uint64_t seq = 0; seq < next; ++seq)
        CHECK(rec.index.ranks().at(rank).count(rank * 1000000 + seq) == 1);
  }
}

bool noted(const std::vector<store_note>& notes, const std::string& kind) {
  for (const auto& n : notes)
    if (n.kind == kind)
      return true;
  return false;
}

fs::path largest(const fs::path& dir, const std::string& ext) {
  fs::path best;
  uintmax_t size = 0;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ext && e.file_size() > size) {
      size = e.file_size();
      best = e.path();
    }
  return best;
}

} // namespace

TEST_CASE("store: an intact store recovers every batch") {
  temp_store_dir t;
  fill(t.dir, 500, true);
  index_store st;
  REQUIRE_FALSE(st.open(t.dir.string()));
  auto rec = st.load();
  CHECK(st.take_notes().empty());
  CHECK(rec.instance_id == "instance-A");
  CHECK(rec.next_seq.at(0) == 500);
  CHECK(rec.index.blocks(1) == 500);
  check_truthful(rec);
}

TEST_CASE("store: garbage in the middle of an sst file is never a silent "
          "partial recovery") {
  temp_store_dir t;
  fill(t.dir, 3000, true);
  auto sst = largest(t.dir, ".sst");
  REQUIRE_FALSE(sst.empty());
  {
    std::fstream f(sst, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(sst) / 2));
    std::string garbage(2048, '\x5a');
    f.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
  }
  index_store st;
  REQUIRE_FALSE(st.open(t.dir.string()));
  auto rec = st.load();
  auto notes = st.take_notes();
  // The damage was seen and repaired: the store rebuilt or the ranks reset.
  CHECK((rec.rebuilt || !rec.corrupt_ranks.empty() || noted(notes, "store")));
  CHECK_FALSE(notes.empty());
  check_truthful(rec);
  // And what the repair left is a working store.
  REQUIRE_FALSE(st.apply(0, 1, batch(0, 0)));
}

TEST_CASE("store: a truncated write-ahead log recovers a consistent prefix "
          "and says so") {
  temp_store_dir t;
  fill(t.dir, 2000, false); // everything still in the log
  auto log = largest(t.dir, ".log");
  REQUIRE_FALSE(log.empty());
  fs::resize_file(log, fs::file_size(log) / 2);
  index_store st;
  REQUIRE_FALSE(st.open(t.dir.string()));
  auto rec = st.load();
  auto notes = st.take_notes();
  CHECK((noted(notes, "wal") || noted(notes, "store")));
  check_truthful(rec);
  // Less than everything came back, and what did is exactly the batches
  // before each rank's next sequence (the engine's replay refills the rest).
  CHECK(rec.index.total_blocks() < 4000);
}

TEST_CASE("store: a garbage CURRENT or MANIFEST is set aside and the store "
          "starts empty") {
  for (const char* victim : {"CURRENT", "MANIFEST"}) {
    DYNAMIC_SECTION(victim) {
      temp_store_dir t;
      fill(t.dir, 100, true);
      fs::path target = t.dir / victim;
      if (std::string(victim) == "MANIFEST")
        for (const auto& e : fs::directory_iterator(t.dir))
          if (e.path().filename().string().rfind("MANIFEST-", 0) == 0)
            target = e.path();
      std::ofstream(target, std::ios::trunc) << "this is not a manifest\n";
      index_store st;
      REQUIRE_FALSE(st.open(t.dir.string()));
      CHECK(noted(st.take_notes(), "store"));
      CHECK(t.set_aside());
      auto rec = st.load();
      CHECK(rec.index.total_blocks() == 0);
      CHECK(rec.next_seq.empty());
      REQUIRE_FALSE(st.apply(0, 1, batch(0, 0)));
    }
  }
}

TEST_CASE("store: a data dir that is a file is set aside") {
  temp_store_dir t;
  std::ofstream(t.dir) << "not a directory";
  index_store st;
  REQUIRE_FALSE(st.open(t.dir.string()));
  CHECK(noted(st.take_notes(), "store"));
  CHECK(t.set_aside());
  CHECK(fs::is_directory(t.dir));
}
