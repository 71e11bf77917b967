#include "runtime/listener_watch.hpp"

#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <dirent.h>
#include <fcntl.h>
#include <openssl/ssl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include "runtime/metrics.hpp"

namespace outrider::runtime {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using boost::system::error_code;

namespace {

// RFC 9113 §3.4: the client connection preface, then a SETTINGS frame
// with no settings (length 0, type 4, flags 0, stream 0).
const std::string h2_preface = std::string("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") +
                               std::string("\0\0\0\4\0\0\0\0\0", 9);

// The probe's steps on one stream type (a socket, or TLS over one).
template <class Stream>
void send_and_await(Stream& s, std::string& verdict, bool& done,
                    std::array<char, 64>& buf) {
  asio::async_write(s, asio::buffer(h2_preface), [&](error_code ec, size_t) {
    if (ec) {
      // Written into a closed connection: closed by a process, so taken.
      verdict.clear();
      done = true;
      return;
    }
    s.async_read_some(asio::buffer(buf), [&](error_code, size_t) {
      // Bytes (SETTINGS), an end of stream or a reset: all come from a
      // process that accepted the connection.
      verdict.clear();
      done = true;
    });
  });
}

std::string probe_once(const std::string& host, uint16_t port,
                       const probe_tls& tls, std::chrono::milliseconds timeout);

} // namespace

std::string probe_listener(const std::string& host, uint16_t port,
                           const probe_tls& tls,
                           std::chrono::milliseconds timeout) {
  // The probe runs exactly when descriptors may be gone: Asio's context
  // (an epoll and an eventfd) and socket would throw then. Asked first
  // whether four are free (no exception: under UBSan, a throw with no
  // descriptor left is reported as a bad vptr, since its check needs a
  // pipe); one taken in between is caught: a failed probe, not a dead
  // thread.
  int spare[4];
  int got = 0;
  for (int& fd : spare) {
    fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    got += fd >= 0 ? 1 : 0;
  }
  for (int fd : spare)
    if (fd >= 0)
      ::close(fd);
  if (got < 4)
    return "probe: no descriptor left to probe with";
  try {
    return probe_once(host, port, tls, timeout);
  } catch (const std::exception& e) {
    return std::string("probe: ") + e.what();
  }
}

namespace {

std::string probe_once(const std::string& host, uint16_t port,
                       const probe_tls& tls,
                       std::chrono::milliseconds timeout) {
  asio::io_context io;
  tcp::socket sock{io};
  asio::ssl::context ctx{asio::ssl::context::tls_client};
  ctx.set_verify_mode(asio::ssl::verify_none);
  if (tls.on && !tls.cert.empty() && !tls.key.empty()) {
    error_code ec;
    ctx.use_certificate_chain(asio::buffer(tls.cert), ec);
    if (!ec)
      ctx.use_private_key(asio::buffer(tls.key), asio::ssl::context::pem, ec);
    if (ec)
      return "the probe's certificate: " + ec.message();
  }
  // ALPN h2, as gRPC clients offer it (a server may insist).
  static const unsigned char alpn[] = {2, 'h', '2'};
  SSL_CTX_set_alpn_protos(ctx.native_handle(), alpn, sizeof(alpn));
  asio::ssl::stream<tcp::socket&> ssl{sock, ctx};
  std::array<char, 64> buf{};
  std::string verdict = "no answer within " + std::to_string(timeout.count()) +
                        " ms (accepted by the kernel, not by the server)";
  bool done = false;
  error_code ec;
  auto addr = asio::ip::make_address(host, ec);
  if (ec)
    return "bad probe address " + host;
  sock.async_connect(tcp::endpoint{addr, port}, [&](error_code ec) {
    if (ec) {
      verdict = "connect: " + ec.message();
      done = true;
      return;
    }
    if (!tls.on)
      return send_and_await(sock, verdict, done, buf);
    ssl.async_handshake(asio::ssl::stream_base::client, [&](error_code ec) {
      if (ec) {
        // A TLS alert or a close: the server's TLS layer answered.
        verdict.clear();
        done = true;
        return;
      }
      send_and_await(ssl, verdict, done, buf);
    });
  });
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done && std::chrono::steady_clock::now() < deadline) {
    io.run_one_until(deadline);
    if (io.stopped())
      io.restart();
  }
  error_code ignored;
  sock.shutdown(tcp::socket::shutdown_both, ignored);
  sock.close(ignored);
  return verdict;
}

} // namespace

std::string probe_host(const std::string& listen_host) {
  std::string h = listen_host;
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']')
    h = h.substr(1, h.size() - 2);
  if (h.empty() || h == "0.0.0.0" || h == "localhost")
    return "127.0.0.1";
  if (h == "::")
    return "::1";
  return h;
}

descriptor_use read_descriptor_use() {
  descriptor_use out;
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0)
    out.limit =
      lim.rlim_cur == RLIM_INFINITY ? -1 : static_cast<long>(lim.rlim_cur);
  // Counting needs a descriptor of its own: none left reads as unknown.
  if (DIR* d = opendir("/proc/self/fd")) {
    long n = 0;
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.')
        ++n;
    closedir(d);
    out.open = n - 1; // less the directory's own
  }
  return out;
}

listener_watch::listener_watch(config cfg) : cfg_(cfg) {}

listener_watch::~listener_watch() {
  stop();
}

void listener_watch::add(listener l) {
  auto& m = global_metrics();
  label_set labels{{"listener", l.name}};
  state s{std::move(l)};
  s.accepting_gauge = &m.get_gauge(
    "outrider_listener_accepting",
    "1 while the listener accepts connections (probed from a fresh "
    "connection each interval), else 0",
    labels);
  s.accepting_gauge->set(1);
  s.restarts =
    &m.get_counter("outrider_listener_restarts_total",
                   "Listeners rebuilt after they stopped accepting", labels);
  s.failed = &m.get_counter(
    "outrider_listener_failures_total",
    "Times a listener was found not accepting connections", labels);
  s.probes =
    &m.get_counter("outrider_listener_probes_total",
                   "Probes of a listener from a fresh connection", labels);
  listeners_.push_back(std::move(s));
}

void listener_watch::start() {
  if (thread_.joinable())
    return;
  thread_ = std::thread([this] { run(); });
}

void listener_watch::stop() {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable())
    thread_.join();
}

void listener_watch::run() {
  auto& m = global_metrics();
  auto& open = m.get_gauge("outrider_process_open_fds",
                           "File descriptors the process has open");
  auto& limit = m.get_gauge("outrider_process_max_fds",
                            "The process's soft limit on file descriptors");
  std::unique_lock<std::mutex> lock{mtx_};
  while (!stopping_) {
    lock.unlock();
    auto fds = read_descriptor_use();
    if (fds.open >= 0)
      open.set(static_cast<double>(fds.open));
    if (fds.limit >= 0)
      limit.set(static_cast<double>(fds.limit));
    for (auto& s : listeners_) {
      try {
        probe(s);
      } catch (const std::exception& e) { // a rebuild that threw, say
        spdlog::error("{} listener: probe failed: {}", s.l.name, e.what());
      }
    }
    lock.lock();
    cv_.wait_for(lock, cfg_.interval, [this] { return stopping_; });
  }
}

void listener_watch::probe(state& s) {
  uint16_t port = s.l.port ? s.l.port() : 0;
  if (port == 0)
    return; // not listening (yet, or while rebuilt)
  auto why = probe_listener(s.l.host, port, s.l.tls, cfg_.timeout);
  s.probes->inc();
  if (why.empty()) {
    s.failures = 0;
    if (!s.accepting) {
      s.accepting = true;
      spdlog::info("{} listener on port {} accepts again", s.l.name, port);
      s.accepting_gauge->set(1);
      if (s.l.on_change)
        s.l.on_change(true, "");
    }
    return;
  }
  ++s.failures;
  if (s.accepting && s.failures >= cfg_.failures_to_fail) {
    s.accepting = false;
    spdlog::error("{} listener on port {} does not accept connections: {}",
                  s.l.name, port, why);
    s.accepting_gauge->set(0);
    s.failed->inc();
    if (s.l.on_change)
      s.l.on_change(false, why);
  }
  if (s.failures >= cfg_.failures_to_restart && s.l.restart) {
    spdlog::warn("{} listener on port {}: rebuilding it", s.l.name, port);
    if (s.l.restart())
      s.restarts->inc();
  }
}

} // namespace outrider::runtime
