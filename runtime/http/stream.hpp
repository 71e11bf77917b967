#pragma once

// Internal to the HTTP server: a connection's byte stream, plain TCP or TLS
// (Boost.Asio's OpenSSL stream) behind one interface, so that Beast's
// parser and Asio's composed writes drive either. Socket-level control
// (cancel, shutdown, close) goes to the TCP socket underneath.

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <optional>
#include <utility>

namespace outrider::runtime {

class http_stream {
 public:
  using socket_type = boost::asio::ip::tcp::socket;
  using executor_type = socket_type::executor_type;

  http_stream(socket_type s, boost::asio::ssl::context* tls) {
    if (tls)
      tls_.emplace(std::move(s), *tls);
    else
      plain_.emplace(std::move(s));
  }

  executor_type get_executor() { return socket().get_executor(); }
  socket_type& socket() { return tls_ ? tls_->next_layer() : *plain_; }
  bool secure() const { return tls_.has_value(); }

  template <class Handler>
  void async_handshake(Handler&& h) {
    tls_->async_handshake(boost::asio::ssl::stream_base::server,
                          std::forward<Handler>(h));
  }
  template <class Buffers, class Handler>
  void async_read_some(const Buffers& b, Handler&& h) {
    if (tls_)
      tls_->async_read_some(b, std::forward<Handler>(h));
    else
      plain_->async_read_some(b, std::forward<Handler>(h));
  }
  template <class Buffers, class Handler>
  void async_write_some(const Buffers& b, Handler&& h) {
    if (tls_)
      tls_->async_write_some(b, std::forward<Handler>(h));
    else
      plain_->async_write_some(b, std::forward<Handler>(h));
  }

 private:
  std::optional<socket_type> plain_;
  std::optional<boost::asio::ssl::stream<socket_type>> tls_;
};

} // namespace outrider::runtime
