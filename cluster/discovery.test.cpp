#include "cluster/discovery.hpp"

#include <filesystem>
#include <fstream>
#include <sys/resource.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

#include <catch2/catch.hpp>

using namespace outrider::cluster;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

struct temp_dir {
  fs::path path;
  temp_dir() {
    static int n = 0;
    path = fs::temp_directory_path() /
           ("outrider-disc-" + std::to_string(::getpid()) + "-" +
            std::to_string(n++));
    fs::create_directories(path);
  }
  ~temp_dir() { fs::remove_all(path); }
};

worker_record record(std::string id) {
  worker_record r;
  r.worker_id = std::move(id);
  r.instance_id = "abc";
  r.model = "m";
  r.relay_endpoint = "127.0.0.1:9100";
  r.engine_endpoint = "127.0.0.1:50051";
  r.protocol = "vllm";
  r.kv_block_size = 64;
  r.total_kv_blocks = 100;
  r.version = "0.1.0";
  return r;
}

} // namespace

TEST_CASE("file discovery publishes, lists and withdraws records") {
  temp_dir d;
  file_discovery disc{d.path.string(), 10s};
  REQUIRE_FALSE(disc.put(record("w1")));
  REQUIRE_FALSE(disc.put(record("w2")));
  auto all = disc.list();
  REQUIRE(all.size() == 2);
  CHECK(all[0].worker_id == "w1");
  CHECK(all[0].kv_block_size == 64);
  auto changed = record("w1");
  changed.instance_id = "def";
  REQUIRE_FALSE(disc.put(changed));
  CHECK(disc.list()[0].instance_id == "def");
  REQUIRE_FALSE(disc.remove("w1"));
  CHECK(disc.list().size() == 1);
  CHECK_FALSE(disc.remove("w1")); // removing twice is fine
  auto bad = disc.put(record("../escape"));
  CHECK(bad == outrider::errc::invalid_argument);
  CHECK_THAT(outrider::describe(bad),
             Catch::Matchers::Contains("invalid worker id '../escape'"));
}

TEST_CASE("a listing that cannot be read keeps the last good one, not an "
          "empty directory") {
  temp_dir d;
  file_discovery disc{d.path.string(), 10s};
  REQUIRE_FALSE(disc.put(record("w1")));
  REQUIRE_FALSE(disc.put(record("w2")));
  REQUIRE(disc.list().size() == 2);
  // No descriptor left: the directory cannot be opened.
  rlimit was{};
  REQUIRE(getrlimit(RLIMIT_NOFILE, &was) == 0);
  int lowest_free = dup(0); // the limit bounds descriptor numbers
  REQUIRE(lowest_free >= 0);
  close(lowest_free);
  rlimit tight = was;
  tight.rlim_cur = static_cast<rlim_t>(lowest_free);
  REQUIRE(setrlimit(RLIMIT_NOFILE, &tight) == 0);
  auto during = disc.list();
  setrlimit(RLIMIT_NOFILE, &was);
  REQUIRE(during.size() == 2);
  CHECK(during[1].worker_id == "w2");
  // Once it reads again, the directory speaks for itself.
  REQUIRE_FALSE(disc.remove("w1"));
  CHECK(disc.list().size() == 1);
}

TEST_CASE("file discovery reports an unwritable directory as an I/O error") {
  temp_dir d;
  auto blocker = d.path / "a-file";
  std::ofstream(blocker) << "x";
  file_discovery disc{(blocker / "records").string(), 10s};
  auto err = disc.put(record("w1"));
  CHECK(err == outrider::errc::io_error);
  CHECK_THAT(outrider::describe(err),
             Catch::Matchers::StartsWith("io_error: "));
  CHECK(disc.keep_alive("w1") == outrider::errc::io_error);
}

TEST_CASE("stale records are dropped and removed by whoever lists") {
  temp_dir d;
  file_discovery disc{d.path.string(), 10s};
  REQUIRE_FALSE(disc.put(record("old")));
  REQUIRE_FALSE(disc.put(record("fresh")));
  fs::last_write_time(d.path / "old.json",
                      fs::file_time_type::clock::now() - 11s);
  auto all = disc.list();
  REQUIRE(all.size() == 1);
  CHECK(all[0].worker_id == "fresh");
  CHECK_FALSE(fs::exists(d.path / "old.json"));
  // keep_alive renews the lease.
  fs::last_write_time(d.path / "fresh.json",
                      fs::file_time_type::clock::now() - 9s);
  REQUIRE_FALSE(disc.keep_alive("fresh"));
  fs::last_write_time(d.path / "fresh.json",
                      fs::last_write_time(d.path / "fresh.json") - 2s);
  CHECK(disc.list().size() == 1);
}

TEST_CASE("a listing sees every change to a record it read before") {
  temp_dir d;
  file_discovery disc{d.path.string(), 10s};
  auto r = record("w");
  r.instance_id = "instance-a";
  REQUIRE_FALSE(disc.put(r));
  REQUIRE(disc.list().at(0).instance_id == "instance-a");
  // Rewritten (a rename: another inode), the same size.
  r.instance_id = "instance-b";
  REQUIRE_FALSE(disc.put(r));
  CHECK(disc.list().at(0).instance_id == "instance-b");
  // Written in place, the same size (the same inode, a new ctime).
  r.instance_id = "instance-c";
  std::ofstream(d.path / "w.json", std::ios::trunc) << to_json(r);
  CHECK(disc.list().at(0).instance_id == "instance-c");
  // A lease's touch: still listed, as it was.
  REQUIRE_FALSE(disc.keep_alive("w"));
  CHECK(disc.list().at(0).instance_id == "instance-c");
  // Broken in place: skipped, not served from what was read before.
  std::ofstream(d.path / "w.json", std::ios::trunc) << "{not json";
  size_t invalid = 0;
  CHECK(disc.list(&invalid).empty());
  CHECK(invalid == 1);
  // Removed, then written again.
  fs::remove(d.path / "w.json");
  CHECK(disc.list().empty());
  REQUIRE_FALSE(disc.put(r));
  CHECK(disc.list().size() == 1);
}

TEST_CASE("malformed records are skipped and counted") {
  temp_dir d;
  file_discovery disc{d.path.string(), 10s};
  REQUIRE_FALSE(disc.put(record("good")));
  std::ofstream(d.path / "garbage.json") << "{not json";
  std::ofstream(d.path / "typed.json")
    << R"({"worker_id":"typed","instance_id":"x","kv_block_size":"64"})";
  auto r = record("mismatch");
  std::ofstream(d.path / "other-name.json") << to_json(r);
  size_t invalid = 0;
  auto all = disc.list(&invalid);
  CHECK(all.size() == 1);
  CHECK(invalid == 3);
}

TEST_CASE("a FIFO, an oversized file or a huge rank count never blocks or "
          "bloats a listing") {
  temp_dir d;
  file_discovery disc{d.path.string(), 10s};
  REQUIRE_FALSE(disc.put(record("good")));
  // A FIFO nobody writes to: opening it for reading would block for ever.
  REQUIRE(mkfifo((d.path / "x.json").c_str(), 0600) == 0);
  std::ofstream(d.path / "big.json") << std::string(max_record_bytes + 1, ' ');
  auto wide = record("wide");
  wide.data_parallel_size = 3'000'000;
  std::ofstream(d.path / "wide.json") << to_json(wide);
  size_t invalid = 0;
  auto t0 = std::chrono::steady_clock::now();
  auto all = disc.list(&invalid);
  CHECK(std::chrono::steady_clock::now() - t0 < 2s);
  REQUIRE(all.size() == 1);
  CHECK(all[0].worker_id == "good");
  CHECK(invalid == 3);
  std::string why;
  CHECK_FALSE(record_from_json(to_json(wide), &why));
  CHECK(why == "data_parallel_size 3000000 is over 1024");
}

TEST_CASE("record validation names the problem") {
  std::string why;
  CHECK_FALSE(record_from_json("[]", &why));
  CHECK(why == "not a JSON object");
  auto j = to_json(record("w"));
  CHECK(record_from_json(j, &why));
  auto bad_role = j;
  bad_role.replace(bad_role.find("aggregated"), 10, "boss");
  CHECK_FALSE(record_from_json(bad_role, &why));
  CHECK(why == "unknown role 'boss'");
  // A prefill engine's bootstrap server survives the round trip; a
  // malformed one is refused.
  auto r = record("w");
  r.bootstrap_endpoint = "10.1.2.3:8998";
  auto back = record_from_json(to_json(r), &why);
  REQUIRE(back);
  CHECK(back->bootstrap_endpoint == "10.1.2.3:8998");
  CHECK(record_from_json(j, &why)->bootstrap_endpoint.empty());
  for (const char* bad : {"nohost", ":80", "h:0", "h:65536", "h:8x", "h:"}) {
    r.bootstrap_endpoint = bad;
    CHECK_FALSE(record_from_json(to_json(r), &why));
    CHECK(why == "bootstrap_endpoint is not host:port");
  }
}

TEST_CASE("wait_for_change wakes on a new record") {
  temp_dir d;
  file_discovery watcher{d.path.string(), 10s};
  file_discovery writer{d.path.string(), 10s};
  watcher.wait_for_change(1ms); // arm the watch
  std::thread t([&] {
    std::this_thread::sleep_for(50ms);
    writer.put(record("w"));
  });
  auto t0 = std::chrono::steady_clock::now();
  watcher.wait_for_change(5s);
  t.join();
  CHECK(std::chrono::steady_clock::now() - t0 < 4s);
  CHECK(watcher.list().size() == 1);
}

TEST_CASE("wake ends a wait for change at once, from another thread, and "
          "is not lost when it comes first") {
  temp_dir d;
  file_discovery file{d.path.string(), 10s};
  REQUIRE_FALSE(file.open());
  memory_discovery memory;
  for (discovery* disc :
       {static_cast<discovery*>(&file), static_cast<discovery*>(&memory)}) {
    disc->list();
    disc->wait_for_change(1ms); // arm (inotify)
    std::thread t([&] {
      std::this_thread::sleep_for(50ms);
      disc->wake();
    });
    auto t0 = std::chrono::steady_clock::now();
    disc->wait_for_change(10s);
    t.join();
    CHECK(std::chrono::steady_clock::now() - t0 < 5s);
    // Woken before the wait: the wait returns at once.
    disc->wake();
    t0 = std::chrono::steady_clock::now();
    disc->wait_for_change(10s);
    CHECK(std::chrono::steady_clock::now() - t0 < 5s);
    // And only once: the next wait lasts its timeout.
    t0 = std::chrono::steady_clock::now();
    disc->wait_for_change(100ms);
    CHECK(std::chrono::steady_clock::now() - t0 >= 90ms);
  }
}

TEST_CASE("memory discovery keeps records in process") {
  memory_discovery disc;
  REQUIRE_FALSE(disc.put(record("a")));
  REQUIRE_FALSE(disc.put(record("a")));
  CHECK(disc.list().size() == 1);
  REQUIRE_FALSE(disc.remove("a"));
  CHECK(disc.list().empty());
}

TEST_CASE("file discovery opens a private directory and refuses an open one") {
  temp_dir d;
  auto dir = d.path / "fresh" / "discovery";
  file_discovery fresh{dir.string(), 10s};
  REQUIRE_FALSE(fresh.open());
  struct stat st {};
  REQUIRE(::stat(dir.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
  // Anyone may write there: its records cannot be trusted.
  auto open_dir = d.path / "open";
  fs::create_directories(open_dir);
  fs::permissions(open_dir, fs::perms::all);
  file_discovery open{open_dir.string(), 10s};
  auto err = open.open();
  CHECK(err == outrider::errc::permission_denied);
  CHECK_THAT(outrider::describe(err),
             Catch::Matchers::Contains("writable by anyone"));
  // A file where the directory should be.
  std::ofstream(d.path / "plain") << "x";
  file_discovery plain{(d.path / "plain").string(), 10s};
  CHECK(plain.open() == outrider::errc::io_error);
}

TEST_CASE("file discovery never writes through a planted link and leaves no "
          "temporary file") {
  temp_dir d;
  file_discovery disc{d.path.string(), 10s};
  REQUIRE_FALSE(disc.open());
  // Someone plants a link at the temporary name, aimed at a file of ours.
  auto victim = d.path / "victim.txt";
  std::ofstream(victim) << "keep me";
  fs::create_symlink(victim,
                     d.path / ("w1.json.tmp." + std::to_string(::getpid())));
  REQUIRE_FALSE(disc.put(record("w1")));
  std::ifstream in(victim);
  std::string kept{std::istreambuf_iterator<char>{in}, {}};
  CHECK(kept == "keep me");
  REQUIRE(disc.list().size() == 1);
  for (const auto& e : fs::directory_iterator(d.path))
    CHECK(e.path().filename().string().find(".tmp.") == std::string::npos);
}
