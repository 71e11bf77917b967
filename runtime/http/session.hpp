#pragma once

// Internal to the HTTP server: one connection, driven on the one thread of
// its io_context (core.hpp).

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <memory>
#include <optional>
#include <string>

#include "runtime/http/core.hpp"
#include "runtime/http/stream.hpp"

namespace outrider::runtime {

class http_session : public std::enable_shared_from_this<http_session> {
 public:
  /// `reserved`: taken beyond the connection limit; one request to a
  /// reserved path, then closed.
  http_session(tcp::socket sock, std::shared_ptr<http_server_core> core,
               bool reserved = false);
  ~http_session();

  void start();

  // From an exchange, any thread (each posts to the connection's thread).
  void post_response(http_response r);
  void post_stream_head(int status, std::string content_type,
                        std::map<std::string, std::string> headers);
  void post_data(std::string data);
  void post_end();
  void post_close(); // also marks the exchange in flight gone
  size_t max_queued_bytes() const { return core_->lim.max_queued_bytes; }
  void note_slow_reader() { core_->refused(http_refusal::slow_reader); }

 private:
  enum class timer_kind { idle, reading };
  static constexpr size_t read_chunk = 8192; // bytes per read
  /// Bytes read ahead at most while a request is handled.
  static constexpr size_t watch_ahead = 64 * 1024;

  void handshake(); // TLS: before the first request
  void wait_for_request(std::chrono::milliseconds idle);
  std::chrono::milliseconds read_deadline() const;
  void read_header();
  void on_header(boost::system::error_code ec);
  void on_body(boost::system::error_code ec);
  void on_read_error(boost::system::error_code ec);
  /// A refused request: an error answer, then the connection closes.
  void refuse(http_refusal why, int status, const std::string& message);
  void dispatch();
  void watch();
  void flush();
  void write_done(boost::system::error_code ec, size_t data_bytes);
  /// On the connection's thread: streamed data to send (post_data).
  void take_data(std::string& d);
  void finish_exchange();
  void linger();
  void drain();
  void close();
  void arm(std::chrono::milliseconds after, timer_kind kind);
  void disarm();
  /// A write starts: it must end within send_timeout (session_write.cpp).
  void write_started();
  void write_deadline(boost::system::error_code ec);
  std::string header_text(int status, const std::string& content_type,
                          const std::map<std::string, std::string>& headers,
                          size_t length, bool streamed);

  std::shared_ptr<http_server_core> core_;
  std::shared_ptr<net::ssl::context> tls_; // this connection's, or null
  http_stream stream_; // its executor: the io_context of one I/O thread
  tcp::socket& sock_;  // the TCP socket under stream_
  net::steady_timer timer_;
  uint64_t timer_gen_ = 0;
  /// Watches the write in flight (write_started); one wait at a time.
  net::steady_timer write_timer_;
  bool write_timer_armed_ = false;
  std::chrono::steady_clock::time_point write_since_;
  boost::beast::flat_buffer buf_;
  std::optional<
    boost::beast::http::request_parser<boost::beast::http::string_body>>
    parser_;
  std::shared_ptr<http_exchange_flags> flags_; // the exchange in flight
  /// The body being read's share of the budget (to the exchange at
  /// dispatch).
  std::unique_ptr<http_body_hold> body_hold_;

  unsigned version_ = 11;
  bool head_only_ = false;
  bool keep_alive_ = false;
  bool timed_out_ = false;
  bool watching_ = false;
  bool want_next_ = false;
  bool closed_ = false;
  bool lingering_ = false;
  bool chunked_ = false;
  bool ending_ = false;
  bool reserved_ = false;
  uint64_t idle_key_ = 0; // nonzero while waiting for a request's first byte
  bool finishing_ = false;
  bool writing_ = false;
  std::string head_, pending_, inflight_;
};

} // namespace outrider::runtime
