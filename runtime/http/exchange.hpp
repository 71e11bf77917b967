#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <string>

#include "runtime/http/types.hpp"

namespace outrider::runtime {

class http_session;
class http_body_hold;

/// What an exchange and its connection share (the connection sets them).
struct http_exchange_flags {
  std::atomic<bool> gone{false};
  std::atomic<size_t> queued{0}; // bytes handed to send() not yet written
};

/// One request and its answer. A handler gets it, may hand it to any
/// thread, and answers exactly once: either `respond` with a whole response,
/// or `begin_stream`, any number of `send`, then `end`. Every method is
/// thread-safe and never blocks: writes are queued on the connection and
/// what is queued while a write is in flight goes out merged in the next
/// one. Dropping an unanswered exchange answers 500.
class http_exchange {
 public:
  /// `body_hold`: the body's share of the server's body budget (null
  /// without a body), given back by `drop_body` or with the exchange.
  http_exchange(std::shared_ptr<http_session> session, http_request req,
                std::shared_ptr<http_exchange_flags> flags,
                std::unique_ptr<http_body_hold> body_hold = nullptr);
  ~http_exchange();
  http_exchange(const http_exchange&) = delete;
  http_exchange& operator=(const http_exchange&) = delete;

  const http_request& request() const { return req_; }
  /// Frees the request body (its memory too) once the handler has read
  /// what it needs: a request held for a long stream does not keep a body
  /// of up to the body limit. Call from the handler only, before handing
  /// the exchange to another thread.
  void drop_body();

  /// The whole answer (HEAD requests get the headers only).
  void respond(http_response r);

  /// Starts a streamed answer: the status line and headers go out now, the
  /// body as `send` provides it (chunked on HTTP/1.1).
  void begin_stream(int status, const std::string& content_type,
                    const std::map<std::string, std::string>& headers = {});
  /// Queues body bytes; false once the client is gone, stopped reading
  /// (send deadline or too many queued bytes) or the server is stopping.
  bool send(std::string data);
  /// Ends a streamed answer.
  void end();

  /// The client went away (or cannot keep up, or the server closed it):
  /// work for this request can stop.
  bool gone() const { return flags_->gone.load(std::memory_order_relaxed); }

 private:
  friend class http_session;
  std::shared_ptr<http_session> session_;
  http_request req_;
  std::shared_ptr<http_exchange_flags> flags_;
  std::unique_ptr<http_body_hold> body_hold_;
  std::atomic<bool> answered_{false};
  bool streaming_ = false; // begin_stream was called (by the one answerer)
};

} // namespace outrider::runtime
