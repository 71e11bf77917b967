#include "runtime/fd_acceptor.hpp"

#include <atomic>
#include <boost/asio.hpp>
#include <optional>
#include <set>
#include <sys/resource.h>
#include <thread>

#include <spdlog/spdlog.h>

#include "runtime/metrics.hpp"

namespace outrider::runtime {

namespace net = boost::asio;
using tcp = net::ip::tcp;

bool in_descriptor_reserve(int fd, size_t reserve) {
  rlimit lim{};
  if (reserve == 0 || getrlimit(RLIMIT_NOFILE, &lim) != 0 ||
      lim.rlim_cur == RLIM_INFINITY || lim.rlim_cur <= reserve)
    return false;
  return static_cast<rlim_t>(fd) >= lim.rlim_cur - reserve;
}

namespace {

constexpr const char* refusal_names[] = {"descriptor_reserve",
                                         "too_many_pending",
                                         "first_bytes_timeout", "closed_early"};
enum refusal : size_t {
  descriptor_reserve,
  too_many_pending,
  first_bytes_timeout,
  closed_early
};

// A connection waiting for its first bytes.
struct pending_conn {
  tcp::socket socket;
  net::steady_timer timer;
  explicit pending_conn(tcp::socket s)
    : socket(std::move(s)), timer(socket.get_executor()) {}
};

} // namespace

struct fd_acceptor_state : std::enable_shared_from_this<fd_acceptor_state> {
  fd_acceptor_config cfg;
  net::io_context ioc{1};
  tcp::acceptor acceptor{ioc};
  net::steady_timer backoff{ioc};
  std::chrono::milliseconds backoff_now{0};
  fd_acceptor::take_fn take;
  std::atomic<bool> stopping{false};
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  std::thread thread;
  // Connections waiting for their first bytes (on the I/O thread only).
  std::set<std::shared_ptr<pending_conn>> pending;
  counter* accepted = nullptr;
  counter* handed = nullptr;
  counter* accept_errors = nullptr;
  std::vector<counter*> refused;

  explicit fd_acceptor_state(fd_acceptor_config c) : cfg(std::move(c)) {
    auto& m = global_metrics();
    accepted = &m.get_counter("outrider_accept_connections_total",
                              "Connections accepted by outrider's own accept "
                              "loop for a gRPC listener",
                              {{"listener", cfg.name}});
    handed = &m.get_counter(
      "outrider_accept_handed_total",
      "Connections handed to the gRPC server once their first bytes came",
      {{"listener", cfg.name}});
    accept_errors = &m.get_counter(
      "outrider_accept_errors_total",
      "Failed accepts on a gRPC listener (e.g. out of file descriptors)",
      {{"listener", cfg.name}});
    for (const char* why : refusal_names)
      refused.push_back(&m.get_counter(
        "outrider_accept_refused_total",
        "Connections to a gRPC listener closed before the server got them",
        {{"listener", cfg.name}, {"reason", why}}));
  }

  void accept_next() {
    acceptor.async_accept(
      [self = shared_from_this()](boost::system::error_code ec, tcp::socket s) {
        self->accepted_one(ec, std::move(s));
      });
  }

  void accepted_one(boost::system::error_code ec, tcp::socket s) {
    if (stopping.load() || ec == net::error::operation_aborted)
      return;
    if (ec) {
      // EMFILE and friends: back off instead of spinning, then go on (the
      // connections wait in the kernel's backlog meanwhile).
      accept_errors->inc();
      backoff_now = accept_backoff(backoff_now);
      backoff.expires_after(backoff_now);
      backoff.async_wait([self = shared_from_this()](auto e) {
        if (!e && !self->stopping.load())
          self->accept_next();
      });
      return;
    }
    backoff_now = std::chrono::milliseconds{0};
    accepted->inc();
    if (in_descriptor_reserve(s.native_handle(), cfg.fd_reserve))
      refused[descriptor_reserve]->inc();
    else if (pending.size() >= cfg.max_pending)
      refused[too_many_pending]->inc();
    else
      wait_first_bytes(std::make_shared<pending_conn>(std::move(s)));
    accept_next(); // a refused socket closes as it goes out of scope
  }

  // Hands the connection over once it is readable; closes it at the
  // deadline, or if it closes first with nothing sent.
  void wait_first_bytes(std::shared_ptr<pending_conn> c) {
    pending.insert(c);
    c->timer.expires_after(cfg.first_bytes_timeout);
    c->timer.async_wait(
      [self = shared_from_this(), c](boost::system::error_code e) {
        if (e || !self->pending.erase(c))
          return;
        self->refused[first_bytes_timeout]->inc();
        boost::system::error_code ignored;
        c->socket.close(ignored);
      });
    c->socket.async_wait(
      tcp::socket::wait_read,
      [self = shared_from_this(), c](boost::system::error_code e) {
        if (!self->pending.erase(c))
          return; // timed out, or stopping
        c->timer.cancel();
        if (e)
          return;
        self->hand_over(*c);
      });
  }

  void hand_over(pending_conn& c) {
    char probe;
    auto n = ::recv(c.socket.native_handle(), &probe, 1, MSG_PEEK);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
      refused[closed_early]->inc();
      return; // closed (or failed) before a byte came; closed with `c`
    }
    boost::system::error_code ignored;
    c.socket.set_option(tcp::no_delay(true), ignored);
    c.socket.non_blocking(true, ignored);
    handed->inc();
    take(c.socket.release());
  }

  // On the I/O thread: the listener, the back-off and every pending
  // connection go, so that run() returns.
  void close_all() {
    boost::system::error_code ignored;
    acceptor.close(ignored);
    backoff.cancel();
    for (const auto& c : pending) {
      c->timer.cancel();
      c->socket.close(ignored);
    }
    pending.clear();
    work.reset();
  }
};

fd_acceptor::fd_acceptor(fd_acceptor_config cfg)
  : cfg_(std::move(cfg)), st_(std::make_shared<fd_acceptor_state>(cfg_)) {}

fd_acceptor::~fd_acceptor() {
  stop();
}

caf::error fd_acceptor::bind(const std::string& host, uint16_t port) {
  boost::system::error_code ec;
  auto h = host;
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']')
    h = h.substr(1, h.size() - 2);
  auto addr = net::ip::make_address(h == "localhost" ? "127.0.0.1" : h, ec);
  if (ec)
    return make_error(errc::invalid_argument,
                      "'" + host + "' is not an IP address: " + ec.message());
  tcp::endpoint ep{addr, port};
  auto& a = st_->acceptor;
  a.open(ep.protocol(), ec);
  if (!ec)
    a.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec)
    a.bind(ep, ec);
  if (!ec)
    a.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    boost::system::error_code ignored;
    a.close(ignored);
    return make_error(errc::bind_failed, "cannot listen on " + host + ":" +
                                           std::to_string(port) + ": " +
                                           ec.message());
  }
  port_ = a.local_endpoint().port();
  return {};
}

void fd_acceptor::start(take_fn take) {
  auto& s = *st_;
  if (s.thread.joinable() || !s.acceptor.is_open())
    return;
  s.take = std::move(take);
  s.work.emplace(s.ioc.get_executor());
  st_->accept_next();
  s.thread = std::thread([st = st_] { st->ioc.run(); });
}

void fd_acceptor::stop() {
  auto& s = *st_;
  if (s.stopping.exchange(true))
    return;
  if (!s.thread.joinable()) {
    s.close_all();
    return;
  }
  net::post(s.ioc, [st = st_] { st->close_all(); });
  s.thread.join();
}

} // namespace outrider::runtime
