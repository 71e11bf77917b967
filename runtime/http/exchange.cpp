#include "runtime/http/exchange.hpp"

#include "runtime/http/session.hpp"

namespace outrider::runtime {

http_exchange::http_exchange(std::shared_ptr<http_session> session,
                             http_request req,
                             std::shared_ptr<http_exchange_flags> flags,
                             std::unique_ptr<http_body_hold> body_hold)
  : session_(std::move(session)), req_(std::move(req)),
    flags_(std::move(flags)), body_hold_(std::move(body_hold)) {}

void http_exchange::drop_body() {
  req_.body.clear();
  req_.body.shrink_to_fit();
  body_hold_.reset();
}

http_exchange::~http_exchange() {
  if (!answered_.exchange(true))
    session_->post_response(http_error(500, "the request was not answered"));
  else if (streaming_)
    session_->post_end(); // a stream the handler did not end
}

void http_exchange::respond(http_response r) {
  if (answered_.exchange(true))
    return;
  session_->post_response(std::move(r));
}

void http_exchange::begin_stream(
  int status, const std::string& content_type,
  const std::map<std::string, std::string>& headers) {
  if (answered_.exchange(true))
    return;
  streaming_ = true;
  session_->post_stream_head(status, content_type, headers);
}

bool http_exchange::send(std::string data) {
  if (!streaming_ || gone())
    return false;
  auto queued = flags_->queued.fetch_add(data.size()) + data.size();
  if (queued > session_->max_queued_bytes()) {
    // The reader stopped reading: cut it off rather than buffer without end.
    flags_->gone = true;
    session_->note_slow_reader();
    session_->post_close();
    return false;
  }
  session_->post_data(std::move(data));
  return true;
}

void http_exchange::end() {
  if (!streaming_)
    return;
  streaming_ = false;
  session_->post_end();
}

} // namespace outrider::runtime
