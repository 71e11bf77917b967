#include "runtime/http_server.hpp"

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <vector>

namespace outrider::runtime {

namespace {

using clock_type = std::chrono::steady_clock;

struct connection {
  int fd = -1;
  std::string in;
  std::string out;
  size_t sent = 0;
  bool responding = false;
  clock_type::time_point deadline;
};

void set_nonblocking(int fd) {
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL, 0) | O_NONBLOCK);
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), ::tolower);
  return s;
}

std::string trim(const std::string& s) {
  auto b = s.find_first_not_of(" \t");
  auto e = s.find_last_not_of(" \t");
  return b == std::string::npos ? std::string{} : s.substr(b, e - b + 1);
}

std::string serialize(const http_response& r, bool head) {
  std::string out = "HTTP/1.1 " + std::to_string(r.status) + " " +
                    http_reason(r.status) + "\r\n";
  out += "Content-Type: " + r.content_type + "\r\n";
  out += "Content-Length: " + std::to_string(r.body.size()) + "\r\n";
  out += "Connection: close\r\n";
  for (const auto& [k, v] : r.headers)
    out += k + ": " + v + "\r\n";
  out += "\r\n";
  if (!head)
    out += r.body;
  return out;
}

http_response error_response(int status, const std::string& why) {
  http_response r;
  r.status = status;
  r.content_type = "application/json";
  r.body = "{\"error\":{\"code\":" + std::to_string(status) +
           ",\"message\":\"" + why + "\"}}\n";
  return r;
}

enum class parse_state { incomplete, done, failed };

// Parses `c.in`; on `failed` or `done` fills `resp` (errors) or `req`.
parse_state parse(const std::string& in, const http_server::limits& lim,
                  http_request& req, http_response& err) {
  auto end = in.find("\r\n\r\n");
  if (end == std::string::npos) {
    if (in.size() > lim.max_header_bytes) {
      err = error_response(431, "request header too large");
      return parse_state::failed;
    }
    return parse_state::incomplete;
  }
  if (end > lim.max_header_bytes) {
    err = error_response(431, "request header too large");
    return parse_state::failed;
  }
  auto line_end = in.find("\r\n");
  auto line = in.substr(0, line_end);
  auto sp1 = line.find(' ');
  auto sp2 = line.rfind(' ');
  if (sp1 == std::string::npos || sp2 == sp1 || sp1 == 0) {
    err = error_response(400, "malformed request line");
    return parse_state::failed;
  }
  req.method = line.substr(0, sp1);
  req.target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  auto version = line.substr(sp2 + 1);
  if (version.rfind("HTTP/", 0) != 0 || req.target.empty() ||
      req.target[0] != '/' ||
      !std::all_of(req.method.begin(), req.method.end(), ::isupper)) {
    err = error_response(400, "malformed request line");
    return parse_state::failed;
  }
  if (version != "HTTP/1.1" && version != "HTTP/1.0") {
    err = error_response(505, "only HTTP/1.0 and HTTP/1.1 are supported");
    return parse_state::failed;
  }
  req.path = req.target.substr(0, req.target.find('?'));
  size_t pos = line_end + 2;
  while (pos < end) {
    auto eol = in.find("\r\n", pos);
    auto h = in.substr(pos, eol - pos);
    auto colon = h.find(':');
    if (colon == std::string::npos || colon == 0) {
      err = error_response(400, "malformed header line");
      return parse_state::failed;
    }
    req.headers[lower(h.substr(0, colon))] = trim(h.substr(colon + 1));
    pos = eol + 2;
  }
  if (req.headers.count("transfer-encoding")) {
    err = error_response(501, "chunked request bodies are not supported");
    return parse_state::failed;
  }
  size_t body_len = 0;
  if (auto i = req.headers.find("content-length"); i != req.headers.end()) {
    const auto& v = i->second;
    if (v.empty() || v.size() > 12 ||
        !std::all_of(v.begin(), v.end(), ::isdigit)) {
      err = error_response(400, "malformed Content-Length");
      return parse_state::failed;
    }
    body_len = std::stoull(v);
    if (body_len > lim.max_body_bytes) {
      err = error_response(413, "request body too large");
      return parse_state::failed;
    }
  }
  if (in.size() < end + 4 + body_len)
    return parse_state::incomplete;
  req.body = in.substr(end + 4, body_len);
  return parse_state::done;
}

} // namespace

int parse_http_request(const std::string& in, const http_server::limits& lim,
                       http_request& req, http_response& err) {
  switch (parse(in, lim, req, err)) {
  case parse_state::incomplete:
    return 0;
  case parse_state::done:
    return 1;
  case parse_state::failed:
    break;
  }
  return -1;
}

std::string serialize_http_response(const http_response& r, bool head_only) {
  return serialize(r, head_only);
}

const char* http_reason(int status) {
  switch (status) {
  case 200:
    return "OK";
  case 204:
    return "No Content";
  case 400:
    return "Bad Request";
  case 404:
    return "Not Found";
  case 405:
    return "Method Not Allowed";
  case 408:
    return "Request Timeout";
  case 413:
    return "Content Too Large";
  case 429:
    return "Too Many Requests";
  case 431:
    return "Request Header Fields Too Large";
  case 500:
    return "Internal Server Error";
  case 501:
    return "Not Implemented";
  case 503:
    return "Service Unavailable";
  case 505:
    return "HTTP Version Not Supported";
  default:
    return "Unknown";
  }
}

http_server::http_server(handler h, limits lim)
  : handler_(std::move(h)), limits_(lim) {}

http_server::~http_server() {
  stop();
}

std::string http_server::start(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  auto port_text = std::to_string(port);
  if (int rc = getaddrinfo(host.c_str(), port_text.c_str(), &hints, &res);
      rc != 0)
    return "cannot resolve '" + host + "': " + gai_strerror(rc);
  std::string err;
  for (auto* ai = res; ai; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, 0);
    if (fd < 0)
      continue;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 128) == 0) {
      listen_fd_ = fd;
      break;
    }
    err = std::strerror(errno);
    close(fd);
  }
  freeaddrinfo(res);
  if (listen_fd_ < 0)
    return "cannot listen on " + host + ":" + port_text + ": " + err;
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&ss), &len);
  port_ = ntohs(ss.ss_family == AF_INET6
                  ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                  : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  set_nonblocking(listen_fd_);
  if (pipe2(wake_pipe_, O_CLOEXEC | O_NONBLOCK) != 0)
    return std::string{"pipe: "} + std::strerror(errno);
  thread_ = std::thread([this] { run(); });
  return {};
}

void http_server::stop() {
  if (stopping_.exchange(true))
    return;
  if (wake_pipe_[1] >= 0) {
    char c = 0;
    [[maybe_unused]] auto n = write(wake_pipe_[1], &c, 1);
  }
  if (thread_.joinable())
    thread_.join();
  for (int* fd : {&listen_fd_, &wake_pipe_[0], &wake_pipe_[1]}) {
    if (*fd >= 0)
      close(*fd);
    *fd = -1;
  }
}

void http_server::run() {
  std::vector<connection> conns;
  std::vector<pollfd> fds;
  while (!stopping_.load()) {
    fds.clear();
    fds.push_back({wake_pipe_[0], POLLIN, 0});
    bool accepting = conns.size() < limits_.max_connections;
    fds.push_back({listen_fd_, static_cast<short>(accepting ? POLLIN : 0), 0});
    for (auto& c : conns)
      fds.push_back(
        {c.fd, static_cast<short>(c.responding ? POLLOUT : POLLIN), 0});
    if (poll(fds.data(), fds.size(), 100) < 0 && errno != EINTR)
      break;
    if (fds[0].revents)
      break;
    auto now = clock_type::now();
    for (size_t i = 0; i < conns.size(); ++i) {
      auto& c = conns[i];
      auto ev = fds[i + 2].revents;
      if (!c.responding && (ev & (POLLIN | POLLHUP | POLLERR))) {
        char buf[4096];
        auto n = read(c.fd, buf, sizeof(buf));
        if (n <= 0 && !(n < 0 && errno == EAGAIN)) {
          close(c.fd);
          c.fd = -1;
          continue;
        }
        if (n > 0)
          c.in.append(buf, static_cast<size_t>(n));
        http_request req;
        http_response resp;
        auto st = parse(c.in, limits_, req, resp);
        if (st == parse_state::done) {
          try {
            resp = handler_(req);
          } catch (const std::exception& e) {
            resp = error_response(500, "internal error");
          }
        }
        if (st != parse_state::incomplete) {
          c.out = serialize(resp, req.method == "HEAD");
          c.responding = true;
        }
      } else if (!c.responding && now > c.deadline) {
        c.out = serialize(error_response(408, "request timeout"), false);
        c.responding = true;
      }
      if (c.responding && c.fd >= 0) {
        auto n = send(c.fd, c.out.data() + c.sent, c.out.size() - c.sent,
                      MSG_NOSIGNAL);
        if (n > 0)
          c.sent += static_cast<size_t>(n);
        if ((n < 0 && errno != EAGAIN) || c.sent == c.out.size() ||
            now > c.deadline + limits_.request_timeout) {
          shutdown(c.fd, SHUT_WR);
          close(c.fd);
          c.fd = -1;
        }
      }
    }
    conns.erase(std::remove_if(conns.begin(), conns.end(),
                               [](const connection& c) { return c.fd < 0; }),
                conns.end());
    if (accepting && (fds[1].revents & POLLIN)) {
      // Bounded: at most a few accepts per wake-up.
      for (int k = 0; k < 16 && conns.size() < limits_.max_connections; ++k) {
        int fd =
          accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
          break;
        connection c;
        c.fd = fd;
        c.deadline = now + limits_.request_timeout;
        conns.push_back(std::move(c));
      }
    }
  }
  for (auto& c : conns)
    close(c.fd);
}

} // namespace outrider::runtime
