#pragma once

// A raw TCP client for HTTP tests: the tests speak bytes, as an attacker
// would. Every wait is bounded.

#include <arpa/inet.h>
#include <chrono>
#include <cstdint>
#include <netinet/in.h>
#include <poll.h>
#include <string>
#include <sys/socket.h>
#include <unistd.h>

namespace outrider::test {

struct raw_client {
  using steady = std::chrono::steady_clock;
  int fd = -1;

  explicit raw_client(uint16_t port) {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      close(fd);
      fd = -1;
    }
  }
  ~raw_client() {
    if (fd >= 0)
      close(fd);
  }
  raw_client(const raw_client&) = delete;
  raw_client& operator=(const raw_client&) = delete;

  bool connected() const { return fd >= 0; }

  bool send(const std::string& bytes) {
    size_t off = 0;
    while (fd >= 0 && off < bytes.size()) {
      auto n = ::send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
      if (n <= 0)
        return false;
      off += static_cast<size_t>(n);
    }
    return fd >= 0;
  }

  /// Reads until `done(text)` holds, the server closes, or `limit` passes.
  template <class Pred>
  std::string
  read_until(Pred done,
             std::chrono::milliseconds limit = std::chrono::seconds{10}) {
    std::string out;
    auto deadline = steady::now() + limit;
    while (fd >= 0 && !done(out) && steady::now() < deadline) {
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 20) <= 0)
        continue;
      char buf[16384];
      auto n = recv(fd, buf, sizeof(buf), 0);
      if (n <= 0)
        break;
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }
  std::string read_all(std::chrono::milliseconds limit = std::chrono::seconds{
                         10}) {
    return read_until([](const std::string&) { return false; }, limit);
  }
  /// One whole response (headers, and a Content-Length body).
  std::string
  read_response(std::chrono::milliseconds limit = std::chrono::seconds{10}) {
    return read_until(
      [](const std::string& t) {
        auto end = t.find("\r\n\r\n");
        if (end == std::string::npos)
          return false;
        auto cl = t.find("Content-Length: ");
        if (cl == std::string::npos || cl > end)
          return true;
        return t.size() >= end + 4 + std::stoul(t.substr(cl + 16));
      },
      limit);
  }
  /// True when the server closed the connection within `limit`.
  bool closed_within(std::chrono::milliseconds limit) {
    auto deadline = steady::now() + limit;
    while (fd >= 0 && steady::now() < deadline) {
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 20) <= 0)
        continue;
      char buf[4096];
      if (recv(fd, buf, sizeof(buf), 0) <= 0)
        return true;
    }
    return false;
  }
};

/// How often `what` occurs in `s`.
inline size_t count_of(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (auto at = s.find(what); at != std::string::npos;
       at = s.find(what, at + 1))
    ++n;
  return n;
}

/// One request on a fresh connection that the client then half-closes;
/// everything the server sent until it closed.
inline std::string roundtrip(uint16_t port, const std::string& bytes) {
  raw_client c{port};
  c.send(bytes);
  shutdown(c.fd, SHUT_WR);
  return c.read_all();
}

} // namespace outrider::test
