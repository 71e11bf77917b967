// The send deadline of a streamed answer (http_limits::send_timeout): a
// write that does not end in time closes the connection and is counted as
// a slow reader; a reader that keeps up is never cut, however long the
// stream runs.
#include <atomic>
#include <chrono>
#include <memory>
#include <sys/socket.h>
#include <thread>

#include <catch2/catch.hpp>

#include "runtime/http/server.hpp"
#include "runtime/metrics.hpp"
#include "tests/eventually.hpp"
#include "tests/raw_client.hpp"

using namespace outrider::runtime;
using namespace std::chrono_literals;
using outrider::test::count_of;
using outrider::test::eventually;

namespace {

uint64_t slow_readers(const std::string& server) {
  return global_metrics()
    .get_counter("outrider_http_refused_total",
                 "Requests or connections refused before a handler saw them",
                 {{"server", server}, {"reason", "slow_reader"}})
    .value();
}

// Streams `events` events of `bytes` bytes, `gap` apart, from a thread of
// its own; `cut` once a send is refused (the connection went).
struct streamer {
  size_t events;
  size_t bytes;
  std::chrono::milliseconds gap;
  std::atomic<bool> cut{false};
  std::atomic<size_t> sent{0};
  std::thread worker;

  void operator()(std::shared_ptr<http_exchange> ex) {
    worker = std::thread([this, ex] {
      ex->begin_stream(200, "text/event-stream");
      const std::string event = "data: " + std::string(bytes, 'x') + "\n\n";
      for (size_t i = 0; i < events; ++i) {
        if (i > 0 && gap.count() > 0)
          std::this_thread::sleep_for(gap); // a token's pace, not a wait
        if (!ex->send(event)) {
          cut = true;
          return;
        }
        ++sent;
      }
      ex->end();
    });
  }
  ~streamer() {
    if (worker.joinable())
      worker.join();
  }
};

// A server on a free port whose every request `s` answers.
std::unique_ptr<http_server> serve(const std::string& name, http_limits lim,
                                   streamer& s) {
  auto server = std::make_unique<http_server>(
    name, http_server::async_handler{[&s](std::shared_ptr<http_exchange> ex) {
      s(std::move(ex));
    }},
    lim);
  REQUIRE_FALSE(server->start("127.0.0.1", 0));
  return server;
}

} // namespace

TEST_CASE("a write that does not end within the send timeout closes the "
          "connection and is counted") {
  const std::string name = "write-deadline-stalled";
  http_limits lim;
  lim.send_timeout = 300ms;
  lim.max_queued_bytes = 64 << 20; // far above what is sent: only time cuts
  streamer s{256, 64 << 10, 0ms};  // 16 MB, more than the sockets hold
  auto server = serve(name, lim, s);
  const auto before = slow_readers(name);
  outrider::test::raw_client stalled{server->port()};
  int rcvbuf = 4096;
  setsockopt(stalled.fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
  stalled.send("GET /big HTTP/1.1\r\n\r\n"); // and never reads
  CHECK(eventually([&] { return slow_readers(name) == before + 1; }, 15s));
  CHECK(eventually([&] { return server->connections() == 0; }, 5s));
  // What was not sent yet is refused: the exchange is gone.
  CHECK(eventually([&] { return s.cut.load() || s.sent.load() == 256; }, 5s));
}

TEST_CASE("a reader that keeps up is never cut, though the stream outlasts "
          "the send timeout many times") {
  const std::string name = "write-deadline-steady";
  http_limits lim;
  lim.send_timeout = 500ms;
  streamer s{16, 100, 100ms}; // 1.5 s of events, one every 100 ms
  auto server = serve(name, lim, s);
  const auto before = slow_readers(name);
  outrider::test::raw_client reader{server->port()};
  reader.send("GET /paced HTTP/1.1\r\n\r\n");
  auto out = reader.read_until(
    [](const std::string& t) {
      return t.find("\r\n0\r\n\r\n") != std::string::npos;
    },
    20s);
  CHECK(count_of(out, "data: ") == 16);
  CHECK_FALSE(s.cut.load());
  CHECK(slow_readers(name) == before);
}
