#include "runtime/http/session.hpp"

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>

#include "runtime/text_checks.hpp"

namespace outrider::runtime {

namespace beast = boost::beast;
namespace http = beast::http;
using boost::system::error_code;

namespace {

std::string lower(std::string_view s) {
  std::string out{s};
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return out;
}

// Checks a complete header: what Beast accepts but outrider refuses.
// Returns 0 when acceptable, else the status to answer with.
int check_header(const http::request_parser<http::string_body>& p,
                 const http_limits& lim, http_refusal& why,
                 std::string& message) {
  const auto& m = p.get();
  if (m.version() != 10 && m.version() != 11) {
    why = http_refusal::version;
    message = "only HTTP/1.0 and HTTP/1.1 are supported";
    return 505;
  }
  auto target = m.target();
  if (target.empty() || target[0] != '/') {
    why = http_refusal::malformed;
    message = "the request target must be a path";
    return 400;
  }
  if (!valid_utf8({target.data(), target.size()})) {
    why = http_refusal::bad_utf8;
    message = "the request target is not valid UTF-8";
    return 400;
  }
  size_t fields = 0;
  for (const auto& f : m) {
    ++fields;
    auto v = f.value();
    if (!valid_utf8({v.data(), v.size()})) {
      why = http_refusal::bad_utf8;
      message = "a header value is not valid UTF-8";
      return 400;
    }
  }
  if (fields > lim.max_headers) {
    why = http_refusal::header_too_large;
    message = "too many header fields";
    return 431;
  }
  // Beast accepts a repeated Content-Length with the same value (and a
  // list); a front door must not: proxies disagree on which one counts.
  auto cl = m.count(http::field::content_length);
  if (cl > 1 || (cl == 1 && m[http::field::content_length].find(',') !=
                              beast::string_view::npos)) {
    why = http_refusal::malformed;
    message = "repeated Content-Length";
    return 400;
  }
  // RFC 9112 §6.1 and §6.3: a request's Transfer-Encoding whose last
  // coding is not chunked leaves its length unknown, and one sent with
  // HTTP/1.0 is faulty framing; outrider decodes no coding but chunked.
  // Beast would read such a body as no body and the bytes after the
  // header as the next request (smuggling behind a proxy that frames it
  // otherwise), so anything but one `chunked` is refused, and closed.
  auto te = m.count(http::field::transfer_encoding);
  if (te > 0) {
    auto v = lower(std::string_view{m[http::field::transfer_encoding].data(),
                                    m[http::field::transfer_encoding].size()});
    auto first = v.find_first_not_of(" \t");
    auto last = v.find_last_not_of(" \t");
    bool chunked_only = te == 1 && first != std::string::npos &&
                        v.substr(first, last - first + 1) == "chunked";
    if (!chunked_only || m.version() == 10) {
      why = http_refusal::malformed;
      message = "only Transfer-Encoding: chunked is accepted";
      return 400;
    }
  }
  return 0;
}

} // namespace

http_session::http_session(tcp::socket sock,
                           std::shared_ptr<http_server_core> core,
                           bool reserved)
  : core_(std::move(core)), tls_(core_->current_tls()),
    stream_(std::move(sock), tls_.get()), sock_(stream_.socket()),
    timer_(sock_.get_executor()), write_timer_(sock_.get_executor()),
    buf_(core_->lim.header_bytes + core_->lim.body_bytes + 2 * read_chunk),
    reserved_(reserved) {
  core_->opened();
}

http_session::~http_session() {
  if (idle_key_ != 0)
    core_->idle_end(idle_key_);
  core_->closed(this);
}

std::chrono::milliseconds http_session::read_deadline() const {
  return reserved_
           ? std::min(core_->lim.read_timeout, core_->lim.reserved_read_timeout)
           : core_->lim.read_timeout;
}

void http_session::start() {
  std::weak_ptr<http_session> weak = shared_from_this();
  {
    std::lock_guard<std::mutex> guard{core_->mtx};
    core_->closers[this] = [weak] {
      if (auto s = weak.lock())
        s->post_close();
    };
  }
  net::post(sock_.get_executor(), [self = shared_from_this()] {
    if (self->stream_.secure())
      self->handshake();
    else
      self->wait_for_request(self->read_deadline());
  });
}

// Within the read deadline, like a request; a failed handshake (plaintext
// on a TLS port, an unknown CA, no client certificate where one is
// required) is counted and the connection closed.
void http_session::handshake() {
  arm(read_deadline(), timer_kind::reading);
  stream_.async_handshake([self = shared_from_this()](error_code ec) {
    self->disarm();
    if (self->closed_)
      return;
    if (ec) {
      self->core_->refused(http_refusal::tls_handshake);
      return self->close();
    }
    self->wait_for_request(self->read_deadline());
  });
}

void http_session::arm(std::chrono::milliseconds after, timer_kind kind) {
  auto gen = ++timer_gen_;
  timer_.expires_after(after);
  timer_.async_wait([self = shared_from_this(), gen, kind](error_code ec) {
    if (ec || gen != self->timer_gen_ || self->closed_)
      return;
    switch (kind) {
    case timer_kind::idle:
      self->close();
      break;
    case timer_kind::reading:
      // The read completes with operation_aborted. A cancel finds nothing
      // to cancel when the last read already completed and its handler
      // is queued (a body dripped byte by byte): that handler then starts
      // the next read. So cancel again shortly until the read has ended
      // (refuse or dispatch disarms this).
      self->timed_out_ = true;
      self->sock_.cancel();
      self->arm(std::chrono::milliseconds{50}, timer_kind::reading);
      break;
    }
  });
}

void http_session::disarm() {
  ++timer_gen_;
  timer_.cancel();
}

// Waits (at most `idle`) for the first byte of the next request.
void http_session::wait_for_request(std::chrono::milliseconds idle) {
  if (closed_)
    return;
  if (buf_.size() > 0) { // pipelined: already here
    read_header();
    return;
  }
  arm(idle, timer_kind::idle);
  std::weak_ptr<http_session> weak = shared_from_this();
  auto key = core_->idle_begin([weak] {
    if (auto s = weak.lock())
      net::post(s->sock_.get_executor(), [s] {
        if (s->idle_key_ != 0)
          s->close(); // still waiting: its slot goes to a new client
      });
  });
  idle_key_ = key;
  stream_.async_read_some(buf_.prepare(read_chunk),
                          [self = shared_from_this()](error_code ec, size_t n) {
                            self->core_->idle_end(self->idle_key_);
                            self->idle_key_ = 0;
                            if (ec) {
                              self->close();
                              return;
                            }
                            self->buf_.commit(n);
                            self->read_header();
                          });
}

void http_session::read_header() {
  parser_.emplace();
  parser_->header_limit(static_cast<uint32_t>(core_->lim.header_bytes));
  parser_->body_limit(core_->lim.body_bytes);
  timed_out_ = false;
  arm(read_deadline(), timer_kind::reading);
  http::async_read_header(stream_, buf_, *parser_,
                          [self = shared_from_this()](error_code ec, size_t) {
                            self->on_header(ec);
                          });
}

void http_session::on_header(error_code ec) {
  if (ec)
    return on_read_error(ec);
  version_ = parser_->get().version();
  head_only_ = parser_->get().method() == http::verb::head;
  http_refusal why{};
  std::string message;
  if (int status = check_header(*parser_, core_->lim, why, message))
    return refuse(why, status, message);
  if (reserved_) {
    auto target = parser_->get().target();
    std::string_view path{target.data(), target.size()};
    path = path.substr(0, path.find('?'));
    const auto& ok = core_->lim.reserved_paths;
    if (std::find(ok.begin(), ok.end(), path) == ok.end())
      return refuse(http_refusal::too_many_connections, 503,
                    "too many connections");
  }
  if (!parser_->is_done()) { // a body: its share of the budget comes first
    auto length = parser_->content_length();
    size_t bytes = length ? static_cast<size_t>(std::min<uint64_t>(
                              *length, core_->lim.body_bytes))
                          : core_->lim.body_bytes;
    if (!core_->reserve_body(bytes))
      return refuse(http_refusal::body_budget, 503,
                    "too many request bodies in flight; retry");
    body_hold_ = std::make_unique<http_body_hold>(core_, bytes);
  }
  auto read_body = [self = shared_from_this()] {
    http::async_read(self->stream_, self->buf_, *self->parser_,
                     [self](error_code e, size_t) { self->on_body(e); });
  };
  if (parser_->is_done())
    return dispatch();
  // Clients such as curl hold a large body back until told to go on.
  auto expect = parser_->get()[http::field::expect];
  if (beast::iequals(expect, "100-continue")) {
    static const std::string go_on = "HTTP/1.1 100 Continue\r\n\r\n";
    net::async_write(
      stream_, net::buffer(go_on),
      [self = shared_from_this(), read_body](error_code e, size_t) {
        if (e)
          return self->close();
        read_body();
      });
    return;
  }
  read_body();
}

void http_session::on_body(error_code ec) {
  if (ec)
    return on_read_error(ec);
  dispatch();
}

void http_session::on_read_error(error_code ec) {
  if (closed_)
    return;
  if (timed_out_)
    return refuse(http_refusal::read_timeout, 408, "request timeout");
  if (ec == http::error::header_limit || ec == http::error::buffer_overflow)
    return refuse(http_refusal::header_too_large, 431,
                  "request header too large");
  if (ec == http::error::bad_version)
    return refuse(http_refusal::version, 505,
                  "only HTTP/1.0 and HTTP/1.1 are supported");
  if (ec == http::error::body_limit)
    return refuse(http_refusal::body_too_large, 413, "request body too large");
  if (ec == http::error::end_of_stream || ec == http::error::partial_message ||
      ec == net::error::eof || ec == net::error::connection_reset ||
      ec == net::error::operation_aborted)
    return close(); // the client went away (or the server is closing)
  refuse(http_refusal::malformed, 400, "malformed request: " + ec.message());
}

void http_session::refuse(http_refusal why, int status,
                          const std::string& message) {
  core_->refused(why);
  disarm();
  body_hold_.reset();
  keep_alive_ = false;
  flags_ = std::make_shared<http_exchange_flags>();
  auto r = http_error(status, message);
  if (status == 503) // too many connections, or bodies: soon again
    r.headers["Retry-After"] = "1";
  head_ = header_text(status, r.content_type, r.headers, r.body.size(), false);
  if (!head_only_)
    head_ += r.body;
  ending_ = true;
  chunked_ = false;
  flush();
}

void http_session::dispatch() {
  disarm();
  auto msg = parser_->release();
  parser_.reset();
  // A large body grew the read buffer: give the memory back for the
  // request's life (pipelined bytes, if any, stay).
  if (buf_.capacity() > 4 * read_chunk && buf_.size() <= read_chunk)
    buf_.shrink_to_fit();
  http_request req;
  req.method = std::string{msg.method_string()};
  req.target = std::string{msg.target()};
  req.path = req.target.substr(0, req.target.find('?'));
  for (const auto& f : msg) {
    auto name = lower({f.name_string().data(), f.name_string().size()});
    auto& v = req.headers[name];
    v += v.empty() ? "" : ", ";
    v.append(f.value().data(), f.value().size());
  }
  req.keep_alive = msg.keep_alive();
  req.body = std::move(msg.body());
  keep_alive_ = req.keep_alive && !core_->stopping.load() && !reserved_;
  flags_ = std::make_shared<http_exchange_flags>();
  auto ex = std::make_shared<http_exchange>(shared_from_this(), std::move(req),
                                            flags_, std::move(body_hold_));
  watch();
  try {
    core_->handler(ex);
  } catch (const std::exception& e) {
    ex->respond(http_error(500, "internal error"));
  } catch (...) {
    ex->respond(http_error(500, "internal error"));
  }
}

// While a request is handled, reads on: a client that closes marks the
// exchange gone; pipelined bytes wait in the buffer for their turn.
void http_session::watch() {
  if (closed_ || watching_)
    return;
  // Read ahead at most `watch_ahead` bytes of what follows (a pipelined
  // request) while this one runs: a client cannot park a body's worth of
  // bytes per connection. Past it, reading waits for the answer's end (a
  // client that closes meanwhile is seen when a write fails).
  if (buf_.size() >= watch_ahead)
    return;
  auto room = std::min(buf_.max_size(), watch_ahead) - buf_.size();
  watching_ = true;
  stream_.async_read_some(buf_.prepare(std::min(room, read_chunk)),
                          [self = shared_from_this()](error_code ec, size_t n) {
                            self->watching_ = false;
                            if (self->closed_)
                              return;
                            if (self->lingering_)
                              return self->drain();
                            if (!ec)
                              self->buf_.commit(n);
                            if (self->want_next_) {
                              self->want_next_ = false;
                              if (ec && ec != net::error::operation_aborted)
                                return self->close();
                              return self->wait_for_request(
                                self->core_->lim.idle_timeout);
                            }
                            if (!ec)
                              return self->watch();
                            // The client is done: the work can stop, the answer
                            // may still go out (a client that only half-closed
                            // reads it).
                            if (self->flags_)
                              self->flags_->gone = true;
                            self->keep_alive_ = false;
                            if (ec != net::error::eof)
                              self->close();
                          });
}

} // namespace outrider::runtime
