#include "runtime/http_server.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "runtime/status.hpp"

using namespace outrider::runtime;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

// Sends raw bytes and reads the whole response (the server closes).
std::string roundtrip(uint16_t port, const std::string& bytes,
                      bool half_close = true) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  size_t off = 0;
  while (off < bytes.size()) {
    auto n = send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n <= 0)
      break;
    off += static_cast<size_t>(n);
  }
  if (half_close)
    shutdown(fd, SHUT_WR);
  std::string out;
  char buf[4096];
  for (;;) {
    auto n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0)
      break;
    out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

struct served {
  http_server server;
  explicit served(http_server::limits lim = {})
    : server(
        [](const http_request& r) {
          http_response resp;
          resp.body = r.method + " " + r.path + " " + r.body;
          return resp;
        },
        lim) {
    REQUIRE(server.start("127.0.0.1", 0).empty());
  }
};

} // namespace

TEST_CASE("a well-formed request reaches the handler") {
  served s;
  auto resp = roundtrip(s.server.port(), "POST /x?q=1 HTTP/1.1\r\nHost: a\r\n"
                                         "Content-Length: 5\r\n\r\nhello");
  CHECK_THAT(resp, StartsWith("HTTP/1.1 200 OK\r\n"));
  CHECK_THAT(resp, Contains("Content-Length: 13\r\n"));
  CHECK_THAT(resp, Contains("\r\n\r\nPOST /x hello"));
}

TEST_CASE("malformed requests get HTTP errors, not the handler") {
  served s;
  auto p = s.server.port();
  CHECK_THAT(roundtrip(p, "garbage\r\n\r\n"), StartsWith("HTTP/1.1 400"));
  CHECK_THAT(roundtrip(p, "GET nopath HTTP/1.1\r\n\r\n"),
             StartsWith("HTTP/1.1 400"));
  CHECK_THAT(roundtrip(p, "GET / HTTP/2.0\r\n\r\n"),
             StartsWith("HTTP/1.1 505"));
  CHECK_THAT(roundtrip(p, "GET / HTTP/1.1\r\nno colon here\r\n\r\n"),
             StartsWith("HTTP/1.1 400"));
  CHECK_THAT(roundtrip(p, "POST / HTTP/1.1\r\nContent-Length: -3\r\n\r\n"),
             StartsWith("HTTP/1.1 400"));
  CHECK_THAT(
    roundtrip(p, "POST / HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n"),
    StartsWith("HTTP/1.1 413"));
  CHECK_THAT(
    roundtrip(p, "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"),
    StartsWith("HTTP/1.1 501"));
  CHECK_THAT(roundtrip(p, "GET / HTTP/1.1\r\nX: " + std::string(10000, 'a')),
             StartsWith("HTTP/1.1 431"));
}

TEST_CASE("a slow request times out with 408") {
  http_server::limits lim;
  lim.request_timeout = std::chrono::milliseconds{200};
  served s{lim};
  CHECK_THAT(roundtrip(s.server.port(), "GET / HTTP/1.1\r\n", false),
             StartsWith("HTTP/1.1 408"));
}

TEST_CASE("the status server routes probes and metrics") {
  auto health = std::make_shared<health_state>("sidecar");
  metrics_registry reg;
  status_server status{health, reg};
  auto get = [&](const std::string& method, const std::string& path) {
    http_request r;
    r.method = method;
    r.path = path;
    return status.handle(r);
  };
  CHECK(get("GET", "/live").status == 200);
  CHECK(get("GET", "/ready").status == 503);
  health->set_component("engine", "serving");
  health->set_ready(true);
  CHECK(get("GET", "/ready").status == 200);
  auto h = get("GET", "/health");
  CHECK(h.status == 200);
  CHECK_THAT(h.body, Contains("\"engine\":{\"state\":\"serving\"}"));
  CHECK_THAT(h.body, Contains("\"status\":\"ready\""));
  health->begin_shutdown();
  health->set_ready(true); // too late: shutdown wins
  CHECK(get("GET", "/ready").status == 503);
  CHECK(get("GET", "/live").status == 200);
  CHECK_THAT(get("GET", "/health").body, Contains("shutting_down"));
  CHECK_THAT(get("GET", "/metrics").body,
             Contains("outrider_status_requests_total"));
  CHECK(get("GET", "/nope").status == 404);
  auto post = get("POST", "/ready");
  CHECK(post.status == 405);
  CHECK(post.headers["Allow"] == "GET, HEAD");
}
