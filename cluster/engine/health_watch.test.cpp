#include "cluster/engine/health_watch.hpp"

#include <array>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <grpcpp/grpcpp.h>

#include "grpc/health/v1/health.grpc.pb.h"
#include "tests/eventually.hpp"

namespace {

namespace net = boost::asio;
using net::ip::tcp;
using outrider::engine::engine_health;
using outrider::engine::health_watch;
using outrider::test::eventually;
using namespace std::chrono_literals;

// A real gRPC server whose health service says SERVING and keeps the
// Watch stream open.
class serving_health final : public grpc::health::v1::Health::CallbackService {
  grpc::ServerWriteReactor<grpc::health::v1::HealthCheckResponse>*
  Watch(grpc::CallbackServerContext*,
        const grpc::health::v1::HealthCheckRequest*) override {
    struct watch final
      : grpc::ServerWriteReactor<grpc::health::v1::HealthCheckResponse> {
      watch() {
        resp.set_status(grpc::health::v1::HealthCheckResponse::SERVING);
        StartWrite(&resp);
      }
      void OnWriteDone(bool) override {}
      void OnCancel() override { Finish(grpc::Status::CANCELLED); }
      void OnDone() override { delete this; }
      grpc::health::v1::HealthCheckResponse resp;
    };
    return new watch;
  }
};

struct health_server {
  health_server() {
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    b.RegisterService(&service);
    server = b.BuildAndStart();
  }
  ~health_server() { server->Shutdown(std::chrono::system_clock::now()); }
  int port = 0;
  serving_health service;
  std::unique_ptr<grpc::Server> server;
};

// A TCP relay in front of `upstream` that holds each connection for `delay`
// before it passes bytes either way: an engine that answers the HTTP/2
// handshake late (a busy process), or never when `upstream` is 0.
class late_relay {
 public:
  late_relay(int upstream, std::chrono::milliseconds delay)
    : upstream_(upstream), delay_(delay) {
    acceptor_.open(tcp::v4());
    acceptor_.bind({net::ip::make_address("127.0.0.1"), 0});
    acceptor_.listen();
    accept();
    thread_ = std::thread{[this] { ioc_.run(); }};
  }
  ~late_relay() {
    ioc_.stop();
    thread_.join();
  }
  int port() const { return acceptor_.local_endpoint().port(); }
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(port()); }

 private:
  struct pair : std::enable_shared_from_this<pair> {
    explicit pair(net::io_context& ioc) : down(ioc), up(ioc), timer(ioc) {}
    tcp::socket down, up;
    net::steady_timer timer;
    std::array<char, 16384> from_down{}, from_up{};
  };

  void accept() {
    auto p = std::make_shared<pair>(ioc_);
    acceptor_.async_accept(p->down, [this, p](boost::system::error_code ec) {
      if (ec)
        return;
      accept();
      p->timer.expires_after(delay_);
      p->timer.async_wait([this, p](boost::system::error_code) {
        if (upstream_ == 0)
          return; // silent: the socket stays open with nothing behind it
        boost::system::error_code e;
        p->up.connect({net::ip::make_address("127.0.0.1"),
                       static_cast<unsigned short>(upstream_)},
                      e);
        if (e)
          return;
        pump(p, p->down, p->up, p->from_down);
        pump(p, p->up, p->down, p->from_up);
      });
      held_.push_back(p);
    });
  }

  static void pump(std::shared_ptr<pair> p, tcp::socket& from, tcp::socket& to,
                   std::array<char, 16384>& buf) {
    from.async_read_some(
      net::buffer(buf),
      [p, &from, &to, &buf](boost::system::error_code ec, size_t n) {
        if (ec) {
          boost::system::error_code ignored;
          to.shutdown(tcp::socket::shutdown_send, ignored);
          return;
        }
        net::async_write(
          to, net::buffer(buf.data(), n),
          [p, &from, &to, &buf](boost::system::error_code e, size_t) {
            if (!e)
              pump(p, from, to, buf);
          });
      });
  }

  int upstream_;
  std::chrono::milliseconds delay_;
  net::io_context ioc_;
  tcp::acceptor acceptor_{ioc_};
  std::vector<std::shared_ptr<pair>> held_; // only touched on ioc_'s thread
  std::thread thread_;
};

struct heard {
  std::mutex mtx;
  std::vector<engine_health> seen;
  void add(engine_health h) {
    std::lock_guard<std::mutex> g{mtx};
    seen.push_back(h);
  }
  std::optional<engine_health> first() {
    std::lock_guard<std::mutex> g{mtx};
    if (seen.empty())
      return std::nullopt;
    return seen.front();
  }
};

} // namespace

// [grpc-threads]: a real gRPC server and channel, gRPC's own threads: left
// out of the ThreadSanitizer run (scripts/test), where Debian's
// uninstrumented gRPC and Abseil report hundreds of races on their own
// synchronisation (docs/testing.md, "ThreadSanitizer").
TEST_CASE("an engine that answers the handshake late is not reported down",
          "[grpc-threads]") {
  health_server engine;
  // gRPC 1.51 gave each connection attempt the initial backoff (100 ms) when
  // the minimum reconnect backoff was set to it: this engine was then
  // reported unreachable before it was ever reported serving.
  late_relay slow{engine.port, 600ms};
  heard h;
  health_watch w{slow.endpoint(), health_watch::backoff{},
                 [&](engine_health e, const std::string&) { h.add(e); }};
  REQUIRE(eventually([&] { return h.first().has_value(); }, 15s));
  CHECK(*h.first() == engine_health::serving);
}

TEST_CASE("an engine that never answers the handshake is reported "
          "unreachable after the connect timeout",
          "[grpc-threads]") {
  late_relay silent{0, 0ms};
  heard h;
  health_watch::backoff b;
  b.connect = 500ms;
  auto start = std::chrono::steady_clock::now();
  health_watch w{silent.endpoint(), b,
                 [&](engine_health e, const std::string&) { h.add(e); }};
  REQUIRE(eventually([&] { return h.first().has_value(); }, 15s));
  auto took = std::chrono::steady_clock::now() - start;
  CHECK(*h.first() == engine_health::unreachable);
  CHECK(took >= 400ms);
  CHECK(took < 10s);
}
