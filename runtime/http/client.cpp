#include "runtime/http/client.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <charconv>
#include <optional>

namespace outrider::runtime {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = asio::ip::tcp;

namespace {

http_fetch exchange(bhttp::verb verb, const std::string& host, uint16_t port,
                    const std::string& target, const std::string* body,
                    const std::string& content_type,
                    std::chrono::milliseconds timeout, size_t max_body) {
  // Asynchronous operations on a private io_context, run for at most
  // `timeout`: Beast's synchronous calls have no deadline.
  http_fetch out;
  asio::io_context io;
  tcp::resolver resolver{io};
  beast::tcp_stream stream{io};
  beast::flat_buffer buffer;
  bhttp::request<bhttp::string_body> req{verb, target, 11};
  req.set(bhttp::field::host, host + ":" + std::to_string(port));
  req.set(bhttp::field::connection, "close");
  if (body) {
    req.set(bhttp::field::content_type, content_type);
    req.body() = *body;
    req.prepare_payload();
  }
  std::optional<bhttp::response_parser<bhttp::string_body>> parser;
  parser.emplace();
  parser->body_limit(max_body);
  parser->header_limit(16384);
  bool done = false;
  auto fail = [&](const char* what, const beast::error_code& ec) {
    out.error = std::string(what) + ": " + ec.message();
    done = true;
  };
  stream.expires_after(timeout);
  resolver.async_resolve(
    host, std::to_string(port),
    [&](beast::error_code ec, const tcp::resolver::results_type& hosts) {
      if (ec)
        return fail("resolve", ec);
      stream.async_connect(
        hosts, [&](beast::error_code ec, const tcp::endpoint&) {
          if (ec)
            return fail("connect", ec);
          bhttp::async_write(stream, req, [&](beast::error_code ec, size_t) {
            if (ec)
              return fail("write", ec);
            bhttp::async_read(
              stream, buffer, *parser, [&](beast::error_code ec, size_t) {
                if (ec)
                  return fail("read", ec);
                out.status = static_cast<int>(parser->get().result_int());
                out.body = std::move(parser->get().body());
                done = true;
              });
          });
        });
    });
  // The stream's own deadline ends connect, write and read; the resolver
  // is bounded by the same wall clock here.
  io.run_for(timeout + std::chrono::milliseconds{100});
  if (!done) {
    out.error = "timed out after " + std::to_string(timeout.count()) + " ms";
    out.status = 0;
  }
  beast::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  return out;
}

} // namespace

http_fetch http_get(const std::string& host, uint16_t port,
                    const std::string& target,
                    std::chrono::milliseconds timeout, size_t max_body) {
  return exchange(bhttp::verb::get, host, port, target, nullptr, {}, timeout,
                  max_body);
}

http_fetch http_post(const std::string& host, uint16_t port,
                     const std::string& target, const std::string& body,
                     const std::string& content_type,
                     std::chrono::milliseconds timeout, size_t max_body) {
  return exchange(bhttp::verb::post, host, port, target, &body, content_type,
                  timeout, max_body);
}

std::optional<http_url> parse_http_url(const std::string& url,
                                       const std::string& default_path,
                                       std::string* why) {
  const std::string scheme = "http://";
  if (url.rfind(scheme, 0) != 0) {
    *why = "'" + url + "' is not http://host:port[/path]";
    return std::nullopt;
  }
  auto rest = url.substr(scheme.size());
  auto slash = rest.find('/');
  auto authority = rest.substr(0, slash);
  http_url e{{}, 0, default_path};
  if (slash != std::string::npos && slash + 1 < rest.size())
    e.target = rest.substr(slash);
  auto colon = authority.rfind(':');
  bool bracketed = !authority.empty() && authority.front() == '[';
  if (colon == std::string::npos ||
      (bracketed && authority.find(']') > colon)) {
    *why = "'" + url + "' names no port";
    return std::nullopt;
  }
  e.host = authority.substr(0, colon);
  if (bracketed && e.host.size() >= 2 && e.host.back() == ']')
    e.host = e.host.substr(1, e.host.size() - 2);
  auto port_text = authority.substr(colon + 1);
  unsigned port = 0;
  auto [end, ec] = std::from_chars(port_text.data(),
                                   port_text.data() + port_text.size(), port);
  if (e.host.empty() || ec != std::errc{} ||
      end != port_text.data() + port_text.size() || port == 0 || port > 65535) {
    *why = "'" + url + "': bad host or port";
    return std::nullopt;
  }
  for (char c : e.target + e.host)
    if (c <= 0x20 || c >= 0x7f) {
      *why = "'" + url + "' holds a space or control character";
      return std::nullopt;
    }
  e.port = static_cast<uint16_t>(port);
  return e;
}

} // namespace outrider::runtime
