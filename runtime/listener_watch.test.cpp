#include "runtime/listener_watch.hpp"

#include <arpa/inet.h>
#include <atomic>
#include <fcntl.h>
#include <mutex>
#include <netinet/in.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "runtime/metrics.hpp"
#include "tests/eventually.hpp"

using namespace outrider::runtime;
using namespace std::chrono_literals;
using outrider::test::eventually;

namespace {

// A loopback listening socket on a free port. `serve`: a thread accepts
// and writes a few bytes to each connection (a server that answers);
// otherwise nothing ever accepts (the kernel completes handshakes into
// the backlog, as for gRPC 1.51's dead listener).
struct tcp_listener {
  int fd = -1;
  uint16_t port = 0;
  std::atomic<bool> stop{false};
  std::thread acceptor;

  explicit tcp_listener(bool serve) {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
    REQUIRE(listen(fd, 64) == 0);
    socklen_t len = sizeof(a);
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
    if (serve)
      acceptor = std::thread([this] {
        while (!stop) {
          int c = accept(fd, nullptr, nullptr);
          if (c < 0)
            return;
          (void)!write(c, "\0\0\0\4\0\0\0\0\0", 9);
          close(c);
        }
      });
  }
  ~tcp_listener() {
    stop = true;
    shutdown(fd, SHUT_RDWR);
    close(fd);
    if (acceptor.joinable())
      acceptor.join();
  }
};

} // namespace

TEST_CASE("probe_listener: a server that accepts answers, and a port nobody "
          "accepts on, or nobody listens on, does not") {
  tcp_listener good{true};
  CHECK(probe_listener("127.0.0.1", good.port, {}, 2s).empty());

  tcp_listener dead{false};
  auto t0 = std::chrono::steady_clock::now();
  auto why = probe_listener("127.0.0.1", dead.port, {}, 300ms);
  CHECK_THAT(why, Catch::Contains("no answer within 300 ms"));
  // Bounded by its timeout.
  CHECK(std::chrono::steady_clock::now() - t0 < 2s);

  uint16_t closed = dead.port;
  {
    tcp_listener gone{false};
    closed = gone.port;
  }
  CHECK_THAT(probe_listener("127.0.0.1", closed, {}, 1s),
             Catch::Contains("connect"));
  // TLS to a server that speaks none: its answer (a close) still counts.
  CHECK(probe_listener("127.0.0.1", good.port, {true}, 2s).empty());
  CHECK_THAT(probe_listener("127.0.0.1", dead.port, {true}, 300ms),
             Catch::Contains("no answer"));
}

TEST_CASE("probe_host: wildcards are probed on the loopback") {
  CHECK(probe_host("0.0.0.0") == "127.0.0.1");
  CHECK(probe_host("") == "127.0.0.1");
  CHECK(probe_host("[::]") == "::1");
  CHECK(probe_host("::") == "::1");
  CHECK(probe_host("10.1.2.3") == "10.1.2.3");
  CHECK(probe_host("[::1]") == "::1");
}

TEST_CASE("listener_watch: a listener that stops accepting is reported "
          "after two failed probes, rebuilt after the third, and reported "
          "accepting again") {
  auto dead = std::make_unique<tcp_listener>(false);
  std::unique_ptr<tcp_listener> rebuilt;
  std::atomic<uint16_t> port{dead->port};
  std::mutex mtx;
  std::vector<std::pair<bool, std::string>> changes;
  std::atomic<int> restarts{0};

  listener_watch::config cfg;
  cfg.interval = 50ms;
  cfg.timeout = 100ms;
  listener_watch w{cfg};
  listener_watch::listener l;
  l.name = "unit";
  l.host = "127.0.0.1";
  l.port = [&] { return port.load(); };
  l.on_change = [&](bool ok, const std::string& why) {
    std::lock_guard<std::mutex> guard{mtx};
    changes.emplace_back(ok, why);
  };
  l.restart = [&] {
    // The first rebuild fails (descriptors still short, say); the next
    // one listens (on another port here: the test cannot take the same).
    if (restarts++ == 0)
      return false;
    rebuilt = std::make_unique<tcp_listener>(true);
    port = rebuilt->port;
    return true;
  };
  w.add(std::move(l));
  auto& accepting = global_metrics().get_gauge("outrider_listener_accepting",
                                               "", {{"listener", "unit"}});
  auto& failures = global_metrics().get_counter(
    "outrider_listener_failures_total", "", {{"listener", "unit"}});
  auto& rebuilt_count = global_metrics().get_counter(
    "outrider_listener_restarts_total", "", {{"listener", "unit"}});
  auto failures_before = failures.value();
  w.start();
  REQUIRE(eventually(
    [&] {
      std::lock_guard<std::mutex> guard{mtx};
      return changes.size() >= 2;
    },
    10s));
  w.stop();
  std::lock_guard<std::mutex> guard{mtx};
  REQUIRE(changes.size() == 2);
  CHECK_FALSE(changes[0].first);
  CHECK_THAT(changes[0].second, Catch::Contains("no answer"));
  CHECK(changes[1].first);
  CHECK(restarts >= 2);
  CHECK(failures.value() == failures_before + 1);
  CHECK(rebuilt_count.value() >= 1);
  CHECK(accepting.value() == 1);
}

TEST_CASE("read_descriptor_use: counts this process's descriptors") {
  auto before = read_descriptor_use();
  REQUIRE(before.open > 0);
  REQUIRE(before.limit > 0);
  int extra[8];
  for (int& fd : extra)
    fd = open("/dev/null", O_RDONLY);
  auto after = read_descriptor_use();
  for (int fd : extra)
    close(fd);
  CHECK(after.open >= before.open + 8);
}
