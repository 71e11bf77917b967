#include "runtime/http/server.hpp"

#include <nlohmann/json.hpp>

#include "runtime/fd_acceptor.hpp"
#include "runtime/http/session.hpp"

namespace outrider::runtime {

namespace {

constexpr const char* refusal_names[] = {
  "malformed",     "bad_utf8",    "header_too_large",     "body_too_large",
  "read_timeout",  "version",     "too_many_connections", "slow_reader",
  "tls_handshake", "body_budget", "descriptor_reserve",
};

// Over the connection limit: one write of a canned answer, then close.
// Never blocks (the socket is non-blocking; a full buffer loses the answer,
// not the listener's time).
void refuse_fast(tcp::socket& s) {
  static const std::string answer = [] {
    auto body = http_error(503, "too many connections").body;
    return "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\n"
           "Content-Type: application/json\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
  }();
  boost::system::error_code ignored;
  s.non_blocking(true, ignored);
  s.write_some(net::buffer(answer), ignored);
  s.shutdown(tcp::socket::shutdown_send, ignored);
  s.close(ignored);
}

void accept_next(const std::shared_ptr<http_server_core>& core) {
  core->acceptor.async_accept(
    core->pick(), [core](boost::system::error_code ec, tcp::socket s) {
      if (core->stopping.load() || ec == net::error::operation_aborted)
        return;
      if (ec) {
        // EMFILE and friends: back off (10 ms doubling to 1 s) instead of
        // spinning on a listener that cannot accept.
        core->accept_errors->inc();
        core->backoff_now = accept_backoff(core->backoff_now);
        core->backoff.expires_after(core->backoff_now);
        core->backoff.async_wait([core](boost::system::error_code e) {
          if (!e)
            accept_next(core);
        });
        return;
      }
      core->backoff_now = std::chrono::milliseconds{0};
      auto open = core->open.load();
      auto& lim = core->lim;
      if (open >= lim.max_connections && core->evict_idle())
        open = 0; // an idle connection gave its slot
      if (in_descriptor_reserve(s.native_handle(), lim.fd_reserve)) {
        core->refused(http_refusal::descriptor_reserve);
        refuse_fast(s);
      } else if (open >= lim.max_connections + lim.reserved_connections) {
        core->refused(http_refusal::too_many_connections);
        refuse_fast(s);
      } else {
        boost::system::error_code ignored;
        s.set_option(tcp::no_delay(true), ignored);
        bool reserved = open >= lim.max_connections;
        std::make_shared<http_session>(std::move(s), core, reserved)->start();
      }
      accept_next(core);
    });
}

} // namespace

http_server_core::http_server_core(std::string n, http_server::async_handler h,
                                   http_limits l)
  : name(std::move(n)), handler(std::move(h)), lim(l) {
  auto& m = global_metrics();
  connections = &m.get_gauge("outrider_http_connections",
                             "Open HTTP connections", {{"server", name}});
  body_bytes_held = &m.get_gauge(
    "outrider_http_body_bytes",
    "Request bytes of bodies being read or held by handlers (counted "
    "against the body budget)",
    {{"server", name}});
  accept_errors = &m.get_counter(
    "outrider_http_accept_errors_total",
    "Failed accepts (e.g. out of file descriptors)", {{"server", name}});
  idle_evictions = &m.get_counter(
    "outrider_http_idle_evictions_total",
    "Idle kept-alive connections closed to make room for a new one",
    {{"server", name}});
  for (const char* why : refusal_names)
    refusals.push_back(&m.get_counter(
      "outrider_http_refused_total",
      "Requests or connections refused before a handler saw them",
      {{"server", name}, {"reason", why}}));
}

bool http_server_core::reserve_body(size_t bytes) {
  auto now = body_bytes.load();
  do {
    if (lim.body_budget != 0 && now + bytes > lim.body_budget)
      return false;
  } while (!body_bytes.compare_exchange_weak(now, now + bytes));
  body_bytes_held->add(static_cast<double>(bytes));
  return true;
}

void http_server_core::release_body(size_t bytes) {
  body_bytes.fetch_sub(bytes);
  body_bytes_held->add(-static_cast<double>(bytes));
}

http_body_hold::~http_body_hold() {
  core_->release_body(bytes_);
}

uint64_t http_server_core::idle_begin(std::function<void()> evict) {
  std::lock_guard<std::mutex> guard{mtx};
  idle[++idle_seq] = std::move(evict);
  return idle_seq;
}

void http_server_core::idle_end(uint64_t key) {
  std::lock_guard<std::mutex> guard{mtx};
  idle.erase(key);
}

bool http_server_core::evict_idle() {
  std::function<void()> evict;
  {
    std::lock_guard<std::mutex> guard{mtx};
    if (idle.empty())
      return false;
    evict = std::move(idle.begin()->second);
    idle.erase(idle.begin());
  }
  idle_evictions->inc();
  evict();
  return true;
}

void http_server_core::opened() {
  connections->set(static_cast<double>(++open));
}

void http_server_core::closed(const void* session) {
  connections->set(static_cast<double>(--open));
  std::lock_guard<std::mutex> guard{mtx};
  closers.erase(session);
  if (closers.empty())
    all_closed.notify_all();
}

http_server::http_server(std::string name, async_handler h, http_limits lim)
  : core_(
      std::make_shared<http_server_core>(std::move(name), std::move(h), lim)) {}

http_server::http_server(std::string name, handler h, http_limits lim)
  : http_server(
      std::move(name),
      async_handler{[h = std::move(h)](std::shared_ptr<http_exchange> ex) {
        ex->respond(h(ex->request()));
      }},
      lim) {}

http_server::~http_server() {
  stop();
}

caf::error http_server::use_tls(const std::string& cert_pem,
                                const std::string& key_pem,
                                const std::string& ca_pem) {
  auto ctx = std::make_shared<net::ssl::context>(net::ssl::context::tls_server);
  boost::system::error_code ec;
  ctx->set_options(net::ssl::context::default_workarounds |
                     net::ssl::context::no_sslv2 | net::ssl::context::no_sslv3 |
                     net::ssl::context::no_tlsv1 |
                     net::ssl::context::no_tlsv1_1,
                   ec);
  if (!ec)
    ctx->use_certificate_chain(net::buffer(cert_pem), ec);
  if (!ec)
    ctx->use_private_key(net::buffer(key_pem), net::ssl::context::pem, ec);
  if (!ec && SSL_CTX_check_private_key(ctx->native_handle()) != 1)
    return make_error(errc::invalid_argument,
                      core_->name +
                        " TLS: the key does not match the certificate");
  if (!ec && !ca_pem.empty()) {
    // Mutual TLS: a client certificate the CA signed, or no connection.
    ctx->add_certificate_authority(net::buffer(ca_pem), ec);
    if (!ec)
      ctx->set_verify_mode(
        net::ssl::verify_peer | net::ssl::verify_fail_if_no_peer_cert, ec);
  }
  if (ec) // never the key's contents in the message
    return make_error(errc::invalid_argument,
                      core_->name + " TLS: " + ec.message());
  std::lock_guard<std::mutex> guard{core_->tls_mtx};
  core_->tls = std::move(ctx);
  return {};
}

caf::error http_server::start(const std::string& host, uint16_t port) {
  auto& c = *core_;
  boost::system::error_code ec;
  auto addr =
    net::ip::make_address(host == "localhost" ? "127.0.0.1" : host, ec);
  if (ec)
    return make_error(errc::bind_failed,
                      "'" + host + "' is not an IP address: " + ec.message());
  tcp::endpoint ep{addr, port};
  c.acceptor.open(ep.protocol(), ec);
  if (!ec)
    c.acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec)
    c.acceptor.bind(ep, ec);
  if (!ec)
    // As deep as the kernel allows (net.core.somaxconn): a burst of
    // connections waits in the kernel rather than having its handshakes
    // dropped and retried seconds later.
    c.acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec)
    return make_error(errc::bind_failed, "cannot listen on " + host + ":" +
                                           std::to_string(port) + ": " +
                                           ec.message());
  port_ = c.acceptor.local_endpoint().port();
  for (auto& ioc : c.iocs)
    c.work.emplace_back(ioc->get_executor());
  accept_next(core_);
  for (size_t i = 0; i < c.iocs.size(); ++i)
    c.threads.emplace_back([core = core_, i] { core->iocs[i]->run(); });
  return {};
}

void http_server::stop(std::chrono::milliseconds grace) {
  auto& c = *core_;
  if (c.stopping.exchange(true) || c.threads.empty())
    return;
  net::post(c.ioc, [core = core_] {
    boost::system::error_code ignored;
    core->acceptor.close(ignored);
    core->backoff.cancel();
  });
  std::vector<std::function<void()>> closers;
  {
    std::lock_guard<std::mutex> guard{c.mtx};
    for (auto& [_, close] : c.closers)
      closers.push_back(close);
  }
  for (auto& close : closers)
    close();
  {
    // Handlers holding an exchange keep its connection; they see it gone.
    std::unique_lock<std::mutex> guard{c.mtx};
    c.all_closed.wait_for(guard, grace, [&] { return c.closers.empty(); });
  }
  // Without work the I/O threads end by themselves once what is pending
  // has completed; a moment for that, then they are stopped.
  c.work.clear();
  auto all_stopped = [&] {
    for (auto& ioc : c.iocs)
      if (!ioc->stopped())
        return false;
    return true;
  };
  for (int i = 0; i < 100 && !all_stopped(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds{10});
  for (auto& ioc : c.iocs)
    ioc->stop();
  for (auto& t : c.threads)
    t.join();
  c.threads.clear();
  // Handlers that stop() left behind hold the core (and so the io_contexts
  // that hold them): run them out here, so that nothing stays behind. A
  // handler run on one may post to another: until none has any.
  for (int round = 0; round < 4; ++round) {
    size_t ran = 0;
    for (auto& ioc : c.iocs) {
      ioc->restart();
      ran += ioc->poll();
    }
    if (ran == 0)
      break;
  }
}

size_t http_server::connections() const {
  return core_->open.load();
}

size_t http_server::idle_connections() const {
  std::lock_guard<std::mutex> guard{core_->mtx};
  return core_->idle.size();
}

http_response http_error(int status, const std::string& message) {
  http_response r;
  r.status = status;
  r.content_type = "application/json";
  // OpenAI's error shape, as the frontends' own errors have it, so that a
  // client reads the server's refusals (a body too large, a slow request)
  // as it reads the API's.
  const char* code = "error";
  switch (status) {
  case 400:
    code = "bad_request";
    break;
  case 404:
    code = "not_found";
    break;
  case 405:
    code = "method_not_allowed";
    break;
  case 408:
    code = "request_timeout";
    break;
  case 413:
    code = "body_too_large";
    break;
  case 431:
    code = "header_too_large";
    break;
  case 500:
    code = "internal_error";
    break;
  case 503:
    code = "unavailable";
    break;
  case 504:
    code = "timeout";
    break;
  case 505:
    code = "http_version_unsupported";
    break;
  }
  nlohmann::json body{
    {"error",
     {{"message", message},
      {"type", status < 500 ? "invalid_request_error" : "server_error"},
      {"param", nullptr},
      {"code", code}}}};
  r.body =
    body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  return r;
}

const char* http_reason(int status) {
  switch (status) {
  case 200:
    return "OK";
  case 204:
    return "No Content";
  case 400:
    return "Bad Request";
  case 404:
    return "Not Found";
  case 405:
    return "Method Not Allowed";
  case 408:
    return "Request Timeout";
  case 413:
    return "Content Too Large";
  case 429:
    return "Too Many Requests";
  case 431:
    return "Request Header Fields Too Large";
  case 499:
    return "Client Closed Request";
  case 500:
    return "Internal Server Error";
  case 501:
    return "Not Implemented";
  case 502:
    return "Bad Gateway";
  case 503:
    return "Service Unavailable";
  case 504:
    return "Gateway Timeout";
  case 505:
    return "HTTP Version Not Supported";
  default:
    return "Unknown";
  }
}

} // namespace outrider::runtime
