// outrider's own accept loop for gRPC listeners: connections are handed
// over once their first bytes come, silent ones are closed at the
// deadline, the process's last descriptors are never handed out, and the
// loop survives running out of descriptors.
#include "runtime/fd_acceptor.hpp"

#include <atomic>
#include <fcntl.h>
#include <memory>
#include <mutex>
#include <sys/resource.h>
#include <unistd.h>
#include <vector>

#include <catch2/catch.hpp>

#include "runtime/metrics.hpp"
#include "tests/eventually.hpp"
#include "tests/raw_client.hpp"

using namespace outrider::runtime;
using namespace std::chrono_literals;
using outrider::test::eventually;
using outrider::test::raw_client;

namespace {

// Takes every descriptor handed over and keeps it (as a server would),
// recording its number; closes them all at the end.
struct taker {
  std::mutex mtx;
  std::vector<int> fds;
  fd_acceptor::take_fn fn() {
    return [this](int fd) {
      std::lock_guard<std::mutex> guard{mtx};
      fds.push_back(fd);
    };
  }
  size_t count() {
    std::lock_guard<std::mutex> guard{mtx};
    return fds.size();
  }
  ~taker() {
    for (int fd : fds)
      ::close(fd);
  }
};

uint64_t refused(const std::string& name, const std::string& reason) {
  return global_metrics()
    .get_counter("outrider_accept_refused_total", "",
                 {{"listener", name}, {"reason", reason}})
    .value();
}

long open_fds() {
  long n = 0;
  for (int fd = 0; fd < 4096; ++fd)
    n += fcntl(fd, F_GETFD) != -1 ? 1 : 0;
  return n;
}

// Lowers this process's soft descriptor limit for the scope.
struct lowered_limit {
  rlimit before{};
  explicit lowered_limit(rlim_t soft) {
    REQUIRE(getrlimit(RLIMIT_NOFILE, &before) == 0);
    rlimit now = before;
    now.rlim_cur = soft;
    REQUIRE(setrlimit(RLIMIT_NOFILE, &now) == 0);
  }
  ~lowered_limit() { setrlimit(RLIMIT_NOFILE, &before); }
};

} // namespace

TEST_CASE("fd_acceptor: hands a connection over once its first bytes "
          "come, closes silent ones at the deadline") {
  fd_acceptor_config cfg;
  cfg.name = "test-first-bytes";
  cfg.first_bytes_timeout = 300ms;
  fd_acceptor a{cfg};
  REQUIRE_FALSE(a.bind("127.0.0.1", 0));
  REQUIRE(a.port() != 0);
  taker t;
  a.start(t.fn());

  raw_client talker{a.port()};
  raw_client silent{a.port()};
  REQUIRE(talker.connected());
  REQUIRE(silent.connected());
  REQUIRE(talker.send("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"));
  CHECK(eventually([&] { return t.count() == 1; }, 5s));
  // The silent one is closed at its deadline, never handed over.
  CHECK(silent.closed_within(5s));
  CHECK(t.count() == 1);
  CHECK(refused(cfg.name, "first_bytes_timeout") == 1);
  // The one handed over is the server's: the bytes are still there to
  // read (peeked, not taken), and the acceptor does not close it.
  char buf[4] = {};
  std::lock_guard<std::mutex> guard{t.mtx};
  CHECK(::recv(t.fds[0], buf, sizeof buf, 0) == 4);
  CHECK(std::string(buf, 4) == "PRI ");
  CHECK_FALSE(talker.closed_within(100ms));
}

TEST_CASE("fd_acceptor: a connection closed before a byte is counted, "
          "and pending connections are bounded") {
  fd_acceptor_config cfg;
  cfg.name = "test-pending";
  cfg.first_bytes_timeout = 10s;
  cfg.max_pending = 2;
  fd_acceptor a{cfg};
  REQUIRE_FALSE(a.bind("127.0.0.1", 0));
  taker t;
  a.start(t.fn());
  {
    raw_client gone{a.port()};
    REQUIRE(gone.connected());
  } // closed with nothing sent
  CHECK(eventually([&] { return refused(cfg.name, "closed_early") == 1; }, 5s));
  std::vector<std::unique_ptr<raw_client>> silent;
  for (int i = 0; i < 2; ++i)
    silent.push_back(std::make_unique<raw_client>(a.port()));
  // Both are pending (not closed); a third is closed at once.
  CHECK_FALSE(silent[0]->closed_within(300ms));
  raw_client third{a.port()};
  CHECK(third.closed_within(5s));
  CHECK(refused(cfg.name, "too_many_pending") == 1);
  CHECK(t.count() == 0);
  // Stopping closes the pending ones without waiting for their deadline.
  auto t0 = std::chrono::steady_clock::now();
  a.stop();
  CHECK(std::chrono::steady_clock::now() - t0 < 2s);
  CHECK(silent[0]->closed_within(2s));
  CHECK(silent[1]->closed_within(2s));
}

TEST_CASE("fd_acceptor: never hands out the process's last descriptors, "
          "and accepts again once descriptors are free") {
  fd_acceptor_config cfg;
  cfg.name = "test-reserve";
  cfg.fd_reserve = 8;
  fd_acceptor a{cfg};
  REQUIRE_FALSE(a.bind("127.0.0.1", 0));
  taker t;
  a.start(t.fn());
  std::vector<std::unique_ptr<raw_client>> clients;
  {
    // 40 descriptors more than open now: each connection takes two here
    // (the client's and the accepted one), so about 16 are handed over
    // before the accepted ones reach the reserve, the rest refused, and
    // the last clients find no descriptor at all (the accept loop then
    // fails with EMFILE and backs off).
    // Each connection is accepted before the next is made: the clients
    // live in this process too, and on a busy machine they would
    // otherwise take every descriptor before the acceptor took any.
    auto limit = static_cast<rlim_t>(open_fds() + 40);
    lowered_limit low{limit};
    auto& accepted = global_metrics().get_counter(
      "outrider_accept_connections_total", "", {{"listener", cfg.name}});
    for (int i = 0; i < 30; ++i) {
      auto before = accepted.value();
      auto c = std::make_unique<raw_client>(a.port());
      if (!c->connected())
        break;
      c->send("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
      clients.push_back(std::move(c));
      if (!eventually([&] { return accepted.value() > before; }, 5s))
        break; // no descriptor left to accept it with
    }
    CHECK(eventually(
      [&] { return refused(cfg.name, "descriptor_reserve") >= 1; }, 5s));
    std::lock_guard<std::mutex> guard{t.mtx};
    INFO("handed over " << t.fds.size() << " of " << clients.size());
    CHECK(!t.fds.empty());
    for (int fd : t.fds)
      CHECK(static_cast<rlim_t>(fd) < limit - cfg.fd_reserve);
  }
  // The limit back and the connections gone: accepting goes on (the
  // ones left in the kernel's backlog meanwhile come first).
  clients.clear();
  auto before = t.count();
  raw_client later{a.port()};
  REQUIRE(later.connected());
  REQUIRE(later.send("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"));
  CHECK(eventually([&] { return t.count() > before; }, 5s));
  CHECK_FALSE(later.closed_within(200ms));
}

TEST_CASE("fd_acceptor: a host that is not an IP address is told apart "
          "from a port that cannot be bound") {
  fd_acceptor a{{}};
  auto err = a.bind("example.invalid", 0);
  CHECK(err == outrider::errc::invalid_argument);
  fd_acceptor b{{}};
  REQUIRE_FALSE(b.bind("127.0.0.1", 0));
  fd_acceptor c{{}};
  CHECK(c.bind("127.0.0.1", b.port()) == outrider::errc::bind_failed);
}
