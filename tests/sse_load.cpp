#include "tests/sse_load.hpp"

#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <deque>
#include <memory>
#include <utility>

namespace outrider::test {

namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using clock_type = std::chrono::steady_clock;

double since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

class runner;

// The numbers of the event's `"token_ids":[...]`, appended to `out`.
void append_token_ids(const std::string& l, std::vector<uint32_t>& out) {
  auto at = l.find("\"token_ids\":[");
  if (at == std::string::npos)
    return;
  const char* p = l.c_str() + at + 13;
  while (*p && *p != ']') {
    char* end = nullptr;
    auto v = std::strtoul(p, &end, 10);
    if (end == p)
      break;
    out.push_back(static_cast<uint32_t>(v));
    p = end;
    if (*p == ',')
      ++p;
  }
}

// One streamed request on its own connection (Connection: close): counts
// `data:` lines as they arrive. Each event is written whole by the server,
// so chunk-size lines of the chunked encoding sit between events, never
// inside one.
class sse_conn : public std::enable_shared_from_this<sse_conn> {
 public:
  sse_conn(runner& r, size_t index, std::string request);
  void start(const tcp::endpoint& ep);
  void close() {
    boost::system::error_code ignored;
    sock_.close(ignored);
  }

 private:
  void read();
  void consume(size_t n);
  void line(const std::string& l);
  void finish(bool broken, const boost::system::error_code& ec = {});

  runner& run_;
  size_t index_;
  tcp::socket sock_;
  std::string request_;
  std::array<char, 16384> buf_{};
  std::string partial_;
  clock_type::time_point sent_;
  clock_type::time_point last_;
  bool finished_ = false;
};

class runner {
 public:
  explicit runner(const sse_load_config& cfg)
    : cfg(cfg), timer_(ioc), started_(cfg.epoch.value_or(clock_type::now())) {}

  void run() {
    size_t width = cfg.concurrency == 0 ? cfg.streams : cfg.concurrency;
    for (size_t i = 0; i < width && i < cfg.streams; ++i)
      launch_next();
    timer_.expires_after(cfg.deadline);
    timer_.async_wait([this](const boost::system::error_code& ec) {
      if (ec)
        return;
      for (auto& w : open_)
        if (auto c = w.lock())
          c->close();
    });
    ioc.run();
  }

  // At most this many connects at once, as clients arriving in a burst
  // would be spread by their own handshakes: a load generator that opens
  // 10,000 sockets in one instant overflows the kernel's SYN queue and
  // measures TCP's retransmission back-off, not the server.
  static constexpr size_t max_connecting = 256;

  void launch_next() {
    if (next_ >= cfg.streams || connecting_ >= max_connecting)
      return;
    if ((cfg.stop && cfg.stop->load()) ||
        (cfg.launch_for.count() > 0 &&
         clock_type::now() - begun_ >= cfg.launch_for)) {
      next_ = cfg.streams; // no more
      return;
    }
    auto i = next_++;
    const auto body = cfg.body(i);
    std::string req = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                      "Connection: close\r\nContent-Type: application/json\r\n"
                      "Content-Length: " +
                      std::to_string(body.size()) + "\r\n\r\n" + body;
    // Results grow with the streams launched: `streams` may be only a
    // bound (a steady load runs until stopped), and a million results
    // made up front take seconds on a busy machine.
    results.emplace_back();
    results[i].started_s =
      std::chrono::duration<double>(clock_type::now() - started_).count();
    auto c = std::make_shared<sse_conn>(*this, i, std::move(req));
    open_.push_back(c);
    ++active_;
    ++connecting_;
    c->start(tcp::endpoint{net::ip::address_v4::loopback(), cfg.port});
  }

  // A connect finished (either way): room for the next one.
  void connected() {
    --connecting_;
    size_t width = cfg.concurrency == 0 ? cfg.streams : cfg.concurrency;
    while (active_ < width && next_ < cfg.streams &&
           connecting_ < max_connecting)
      launch_next();
  }

  void ended() {
    --active_;
    launch_next();
    if (active_ == 0 && next_ >= cfg.streams)
      timer_.cancel();
  }

  const sse_load_config& cfg;
  std::deque<sse_stream_result> results; // references stay valid as it grows
  net::io_context ioc;

 private:
  net::steady_timer timer_;
  std::vector<std::weak_ptr<sse_conn>> open_;
  size_t next_ = 0;
  size_t active_ = 0;
  size_t connecting_ = 0;
  clock_type::time_point started_; // the epoch of started_s
  clock_type::time_point begun_ = clock_type::now();
};

sse_conn::sse_conn(runner& r, size_t index, std::string request)
  : run_(r), index_(index), sock_(r.ioc), request_(std::move(request)),
    sent_(clock_type::now()), last_(sent_) {}

void sse_conn::start(const tcp::endpoint& ep) {
  auto self = shared_from_this();
  sock_.async_connect(ep, [self](const boost::system::error_code& ec) {
    self->run_.connected();
    if (ec)
      return self->finish(true, ec);
    self->sent_ = clock_type::now();
    self->last_ = self->sent_;
    net::async_write(self->sock_, net::buffer(self->request_),
                     [self](const boost::system::error_code& wec, size_t) {
                       if (wec)
                         return self->finish(true, wec);
                       self->read();
                     });
  });
}

void sse_conn::read() {
  auto self = shared_from_this();
  sock_.async_read_some(net::buffer(buf_),
                        [self](const boost::system::error_code& ec, size_t n) {
                          if (n > 0)
                            self->consume(n);
                          if (ec)
                            return self->finish(ec != net::error::eof, ec);
                          self->read();
                        });
}

void sse_conn::consume(size_t n) {
  partial_.append(buf_.data(), n);
  size_t start = 0;
  for (;;) {
    auto nl = partial_.find('\n', start);
    if (nl == std::string::npos)
      break;
    line(partial_.substr(start, nl - start));
    start = nl + 1;
  }
  partial_.erase(0, start);
}

void sse_conn::line(const std::string& l) {
  auto& r = run_.results[index_];
  if (!l.empty() && l != "\r")
    r.last_line = l.substr(0, 200);
  if (r.status == 0 && l.rfind("HTTP/1.", 0) == 0 && l.size() >= 12) {
    r.status = std::atoi(l.c_str() + 9);
    return;
  }
  if (l.rfind("data: ", 0) != 0)
    return;
  if (l.compare(6, 6, "[DONE]") == 0) {
    r.done = true;
    return;
  }
  if (l.find("\"error\"") != std::string::npos) {
    if (!r.error)
      r.error_event = l.substr(0, 300);
    r.error = true;
  }
  if (auto at = l.find("\"completion_tokens\":"); at != std::string::npos)
    r.tokens = std::strtoul(l.c_str() + at + 20, nullptr, 10);
  if (run_.cfg.record_token_ids)
    append_token_ids(l, r.token_ids);
  auto now = clock_type::now();
  if (r.events == 0)
    r.ttft_s = std::chrono::duration<double>(now - sent_).count();
  else if (run_.cfg.record_gaps)
    r.gaps_s.push_back(std::chrono::duration<double>(now - last_).count());
  last_ = now;
  ++r.events;
}

void sse_conn::finish(bool broken, const boost::system::error_code& ec) {
  if (finished_)
    return;
  finished_ = true;
  auto& r = run_.results[index_];
  r.total_s = since(sent_);
  if (broken && !r.done) {
    r.error = true;
    r.broken = ec ? ec.message() : "closed";
  }
  close();
  run_.ended();
}

} // namespace

std::vector<sse_stream_result> run_sse_load(const sse_load_config& cfg) {
  runner r{cfg};
  r.run();
  return {std::make_move_iterator(r.results.begin()),
          std::make_move_iterator(r.results.end())};
}

sse_summary summarize(const std::vector<sse_stream_result>& results) {
  sse_summary s;
  for (const auto& r : results) {
    if (r.status == 200 && r.done && !r.error)
      ++s.complete;
    else
      ++s.failed;
    s.events += r.events;
  }
  return s;
}

} // namespace outrider::test
