// `--role all` as a parent: its engines and sidecars die with it, even
// when it is killed -9, and the engines' KV event sockets listen on
// loopback only (the events carry prompt token ids).
#include <csignal>
#include <dirent.h>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "tests/e2e/process.hpp"
#include "tests/e2e/router_cluster.hpp"
#include "tests/e2e/sidecar_process.hpp"

using namespace outrider::test;
using namespace std::chrono_literals;

namespace {

// The addresses (hex, as /proc/net/tcp writes them) `pid` listens on.
std::vector<std::string> listening(pid_t pid) {
  std::set<std::string> inodes;
  auto fds = "/proc/" + std::to_string(pid) + "/fd";
  std::error_code ec;
  for (const auto& f : std::filesystem::directory_iterator(fds, ec)) {
    auto target = std::filesystem::read_symlink(f.path(), ec).string();
    if (target.rfind("socket:[", 0) == 0)
      inodes.insert(target.substr(8, target.size() - 9));
  }
  std::vector<std::string> out;
  std::istringstream table{read_all("/proc/net/tcp")};
  std::string line;
  std::getline(table, line); // header
  while (std::getline(table, line)) {
    std::istringstream f{line};
    std::string sl, local, remote, state, queues, timer, retr, uid, timeout,
      inode;
    f >> sl >> local >> remote >> state >> queues >> timer >> retr >> uid >>
      timeout >> inode;
    if (state == "0A" && inodes.count(inode))
      out.push_back(local.substr(0, local.find(':')));
  }
  return out;
}

} // namespace

TEST_CASE("role all killed -9 takes its engines and sidecars with it, and "
          "their KV sockets are loopback only") {
  temp_dir work;
  auto status = free_port();
  child_process all{{OUTRIDER_BIN, "--role", "all", "--sim-engines", "2",
                     "--data-dir", work.str(), "--system-port",
                     std::to_string(status), "--http-port",
                     std::to_string(free_port()), "--grpc-port", "0"}};
  REQUIRE(eventually(
    [&] { return metric_value(status, "outrider_router_workers") >= 2; }, 30s));
  auto kids = children_of(all.pid());
  REQUIRE(kids.size() == 4); // two engines, two sidecars
  size_t engines = 0;
  for (auto kid : kids) {
    auto cmd = read_all("/proc/" + std::to_string(kid) + "/cmdline");
    if (cmd.find("outrider-sim") == std::string::npos)
      continue;
    ++engines;
    auto addrs = listening(kid);
    CHECK(addrs.size() >= 3); // gRPC, KV publisher, KV replay
    for (const auto& a : addrs)
      CHECK(a == "0100007F"); // 127.0.0.1
  }
  CHECK(engines == 2);
  all.signal(SIGKILL);
  REQUIRE(all.wait(5s));
  CHECK(eventually(
    [&] {
      for (auto kid : kids)
        if (!dead(kid))
          return false;
      return true;
    },
    15s));
}

TEST_CASE("role all turns ready only once its own workers can be placed on") {
  temp_dir work;
  auto http_port = free_port();
  auto status = free_port();
  child_process all{{OUTRIDER_BIN, "--role", "all", "--sim-engines", "2",
                     "--data-dir", work.str(), "--system-port",
                     std::to_string(status), "--http-port",
                     std::to_string(http_port), "--grpc-port", "0"}};
  // Polled closely: the first 200 must already mean both workers.
  REQUIRE(eventually([&] { return http_get(status, "/ready") == 200; }, 30s));
  CHECK(metric_value(status, "outrider_router_workers") == 2);
  std::string health;
  http_get(status, "/health", &health);
  CHECK_THAT(health, Catch::Matchers::Contains("2 registered"));
  // And the first request is served, not refused with "no worker".
  auto [code, body] =
    http(http_port, "POST", "/v1/completions",
         R"({"prompt": [1, 2, 3, 4, 5, 6, 7, 8], "max_tokens": 2})");
  INFO(body);
  CHECK(code == 200);
}
