// The write side of a connection: answers, streamed bodies, the end of an
// exchange, closing.
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/chunk_encode.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/write.hpp>
#include <sstream>

#include "runtime/http/session.hpp"
#include "runtime/io_batch.hpp"

namespace outrider::runtime {

namespace beast = boost::beast;
namespace http = beast::http;
using boost::system::error_code;

std::string
http_session::header_text(int status, const std::string& content_type,
                          const std::map<std::string, std::string>& headers,
                          size_t length, bool streamed) {
  http::response<http::empty_body> h;
  h.version(version_);
  h.result(static_cast<unsigned>(status));
  h.reason(http_reason(status));
  h.set(http::field::content_type, content_type);
  for (const auto& [k, v] : headers) {
    if (beast::iequals(k, "connection")) {
      if (beast::iequals(v, "close"))
        keep_alive_ = false; // the handler wants this connection to end
      continue;
    }
    h.set(k, v);
  }
  if (!streamed)
    h.content_length(length);
  else if (version_ == 11)
    h.chunked(true);
  else
    keep_alive_ = false; // HTTP/1.0: the body ends when the connection does
  h.keep_alive(keep_alive_);
  std::ostringstream os;
  os << h.base();
  return os.str();
}

void http_session::post_response(http_response r) {
  io_batch::flush(sock_.get_executor());
  net::post(sock_.get_executor(),
            [self = shared_from_this(), r = std::move(r)]() mutable {
              if (self->closed_)
                return;
              self->head_ = self->header_text(r.status, r.content_type,
                                              r.headers, r.body.size(), false);
              if (!self->head_only_)
                self->head_ += r.body;
              self->chunked_ = false;
              self->ending_ = true;
              self->flush();
            });
}

void http_session::post_stream_head(
  int status, std::string content_type,
  std::map<std::string, std::string> headers) {
  io_batch::flush(sock_.get_executor());
  net::post(sock_.get_executor(),
            [self = shared_from_this(), status, ct = std::move(content_type),
             hs = std::move(headers)] {
              if (self->closed_)
                return;
              self->head_ = self->header_text(status, ct, hs, 0, true);
              self->chunked_ = self->version_ == 11;
              self->flush();
            });
}

// Data gathers in the thread's io_batch when one is open (a reader handing
// many streams their tokens at once); anything else posted for the
// connection first sends what gathered for its I/O thread, so that the
// connection's writes keep their order.
void http_session::post_data(std::string data) {
  auto ex = sock_.get_executor();
  if (io_batch::add(
        ex,
        [](const std::shared_ptr<void>& s, std::string& d) {
          static_cast<http_session*>(s.get())->take_data(d);
        },
        shared_from_this(), std::move(data)))
    return;
  net::post(ex, [self = shared_from_this(), d = std::move(data)]() mutable {
    self->take_data(d);
  });
}

void http_session::take_data(std::string& d) {
  if (closed_ || head_only_) {
    if (flags_)
      flags_->queued -= d.size();
    return;
  }
  if (pending_.empty())
    pending_.swap(d);
  else
    pending_ += d;
  flush();
}

void http_session::post_end() {
  io_batch::flush(sock_.get_executor());
  net::post(sock_.get_executor(), [self = shared_from_this()] {
    if (self->closed_)
      return;
    self->ending_ = true;
    self->flush();
  });
}

// At server stop. An exchange in flight is not cut: its last writes (a
// stream's error event and [DONE] after a shutdown) were likely just
// queued; it ends, then the connection closes (finish_exchange lingers
// once the server is stopping). The server's stop bounds the wait.
void http_session::post_close() {
  io_batch::flush(sock_.get_executor());
  net::post(sock_.get_executor(), [self = shared_from_this()] {
    self->keep_alive_ = false;
    if (!self->flags_)
      self->close();
  });
}

void http_session::flush() {
  if (writing_ || closed_)
    return;
  auto done = [self = shared_from_this()](size_t data_bytes) {
    return [self, data_bytes](error_code ec, size_t) {
      self->write_done(ec, data_bytes);
    };
  };
  if (!head_.empty()) {
    inflight_.swap(head_);
    head_.clear();
  } else if (!pending_.empty()) {
    inflight_.swap(pending_);
    pending_.clear();
    write_started();
    if (chunked_)
      net::async_write(stream_, http::make_chunk(net::buffer(inflight_)),
                       done(inflight_.size()));
    else
      net::async_write(stream_, net::buffer(inflight_), done(inflight_.size()));
    return;
  } else if (ending_) {
    ending_ = false;
    if (!chunked_)
      return finish_exchange();
    finishing_ = true;
    write_started();
    net::async_write(stream_, http::make_chunk_last(), done(0));
    return;
  } else {
    return;
  }
  write_started();
  net::async_write(stream_, net::buffer(inflight_), done(0));
}

// A write that has not ended within send_timeout closes the connection (a
// client that stopped reading). Streams write once per token, so no timer
// operation is made per write: the timer, armed when a write starts and it
// is not, looks when it fires at the write in flight then, if any, and
// waits on for that one's own deadline.
void http_session::write_started() {
  writing_ = true;
  write_since_ = std::chrono::steady_clock::now();
  if (write_timer_armed_)
    return;
  write_timer_armed_ = true;
  write_timer_.expires_at(write_since_ + core_->lim.send_timeout);
  write_timer_.async_wait(
    [self = shared_from_this()](error_code ec) { self->write_deadline(ec); });
}

void http_session::write_deadline(error_code ec) {
  write_timer_armed_ = false;
  if (ec || closed_ || !writing_)
    return;
  auto due = write_since_ + core_->lim.send_timeout;
  if (std::chrono::steady_clock::now() >= due) {
    core_->refused(http_refusal::slow_reader);
    return close();
  }
  write_timer_armed_ = true;
  write_timer_.expires_at(due);
  write_timer_.async_wait(
    [self = shared_from_this()](error_code ec) { self->write_deadline(ec); });
}

void http_session::write_done(error_code ec, size_t data_bytes) {
  writing_ = false;
  if (flags_)
    flags_->queued -= data_bytes;
  if (ec)
    return close();
  if (finishing_) {
    finishing_ = false;
    return finish_exchange();
  }
  flush();
}

void http_session::finish_exchange() {
  flags_.reset();
  head_only_ = false;
  if (!keep_alive_ || core_->stopping.load())
    return linger();
  if (watching_) {
    want_next_ = true;
    sock_.cancel(); // the watch ends; its handler reads the next request
    return;
  }
  wait_for_request(core_->lim.idle_timeout);
}

// Closes after the answer without losing it: closing a socket that still
// has unread input sends a reset, which can destroy the answer before the
// client read it. So: end our side, drain what the client still sends for
// a moment (bounded), then close.
void http_session::linger() {
  if (closed_)
    return;
  lingering_ = true;
  error_code ignored;
  sock_.shutdown(tcp::socket::shutdown_send, ignored);
  arm(std::chrono::milliseconds{1000}, timer_kind::idle);
  if (watching_)
    return sock_.cancel(); // the watch's handler drains
  drain();
}

void http_session::drain() {
  buf_.clear();
  stream_.async_read_some(buf_.prepare(read_chunk),
                          [self = shared_from_this()](error_code ec, size_t) {
                            if (self->closed_)
                              return;
                            if (ec)
                              return self->close();
                            self->drain();
                          });
}

void http_session::close() {
  if (closed_)
    return;
  closed_ = true;
  if (flags_)
    flags_->gone = true;
  disarm();
  write_timer_.cancel();
  error_code ignored;
  sock_.shutdown(tcp::socket::shutdown_both, ignored);
  sock_.close(ignored);
}

} // namespace outrider::runtime
