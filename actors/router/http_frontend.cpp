#include "actors/router/http_frontend.hpp"

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "runtime/metrics.hpp"

namespace outrider::router {

namespace {

using json = nlohmann::json;

bool send_all(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    auto n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n <= 0)
      return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

runtime::http_response json_response(int status, const json& body) {
  runtime::http_response r;
  r.status = status;
  r.content_type = "application/json";
  r.body = body.dump() + "\n";
  return r;
}

runtime::http_response
error(int status, const std::string& message, const std::string& code,
      const std::string& type = "invalid_request_error") {
  runtime::global_metrics()
    .get_counter("outrider_http_errors_total",
                 "Frontend requests answered with an error", {{"code", code}})
    .inc();
  return json_response(status, {{"error",
                                 {{"message", message},
                                  {"type", type},
                                  {"param", nullptr},
                                  {"code", code}}}});
}

std::string text_of(const std::vector<uint32_t>& tokens) {
  // No tokenizer yet: the text is the token ids, space separated.
  // (Appending in place: `" " + to_string` trips GCC 12's -Wrestrict at
  // -O3, a false positive.)
  std::string out;
  for (auto t : tokens) {
    if (!out.empty())
      out.push_back(' ');
    out.append(std::to_string(t));
  }
  return out;
}

std::string completion_id() {
  static std::atomic<uint64_t> n{0};
  return "cmpl-" + std::to_string(::getpid()) + "-" + std::to_string(n++);
}

int64_t now_s() {
  return std::chrono::duration_cast<std::chrono::seconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

struct completion_request {
  generate_params params;
  bool stream = false;
  std::string model;
};

// Validates an OpenAI completions body; an error response when it is bad.
std::optional<runtime::http_response>
parse_completion(const std::string& body,
                 const std::vector<std::string>& models,
                 completion_request& out) {
  auto doc = json::parse(body, nullptr, false);
  if (doc.is_discarded())
    return error(400, "the body is not valid JSON", "invalid_json");
  if (!doc.is_object())
    return error(400, "the body must be a JSON object", "invalid_body");
  if (doc.contains("model")) {
    if (!doc["model"].is_string())
      return error(400, "'model' must be a string", "invalid_type");
    out.model = doc["model"].get<std::string>();
    if (!models.empty() &&
        std::find(models.begin(), models.end(), out.model) == models.end())
      return error(404, "the model '" + out.model + "' does not exist",
                   "model_not_found");
  } else if (!models.empty()) {
    out.model = models.front();
  }
  if (!doc.contains("prompt"))
    return error(400, "'prompt' is required", "missing_prompt");
  auto prompt = doc["prompt"];
  if (prompt.is_string())
    return error(400,
                 "text prompts need a tokenizer, which this router does not "
                 "have yet; send token ids: \"prompt\": [1, 2, 3]",
                 "text_prompt_unsupported");
  if (prompt.is_array() && prompt.size() == 1 && prompt[0].is_array())
    prompt = prompt[0]; // a batch of one
  if (!prompt.is_array() || prompt.empty())
    return error(400, "'prompt' must be a non-empty array of token ids",
                 "invalid_prompt");
  for (const auto& t : prompt) {
    if (!t.is_number_unsigned() || t.get<uint64_t>() > UINT32_MAX)
      return error(400, "every prompt token must be an unsigned integer",
                   "invalid_prompt");
    out.params.prompt.push_back(t.get<uint32_t>());
  }
  if (out.params.prompt.size() > 1'000'000)
    return error(400, "the prompt is too long", "prompt_too_long");
  if (doc.contains("max_tokens") && !doc["max_tokens"].is_null()) {
    const auto& m = doc["max_tokens"];
    if (!m.is_number_integer() || m.get<int64_t>() < 1 ||
        m.get<int64_t>() > 1'000'000)
      return error(400, "'max_tokens' must be an integer from 1 to 1000000",
                   "invalid_max_tokens");
    out.params.max_tokens = m.get<uint32_t>();
  }
  if (doc.contains("temperature") && !doc["temperature"].is_null()) {
    if (!doc["temperature"].is_number())
      return error(400, "'temperature' must be a number", "invalid_type");
    out.params.temperature = doc["temperature"].get<double>();
  }
  if (doc.contains("stream") && !doc["stream"].is_null()) {
    if (!doc["stream"].is_boolean())
      return error(400, "'stream' must be true or false", "invalid_type");
    out.stream = doc["stream"].get<bool>();
  }
  out.params.model = out.model;
  return std::nullopt;
}

json usage_of(const generate_outcome& o) {
  return {{"prompt_tokens", o.prompt_tokens},
          {"completion_tokens", o.tokens.size()},
          {"total_tokens", o.prompt_tokens + o.tokens.size()},
          {"prompt_tokens_details", {{"cached_tokens", o.cached_tokens}}}};
}

} // namespace

http_frontend::http_frontend(dispatcher& d,
                             std::function<std::vector<std::string>()> models,
                             size_t max_connections)
  : dispatcher_(d), models_(std::move(models)),
    max_connections_(max_connections) {}

http_frontend::~http_frontend() {
  stop();
}

std::string http_frontend::start(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  auto port_text = std::to_string(port);
  if (getaddrinfo(host.c_str(), port_text.c_str(), &hints, &res) != 0)
    return "cannot resolve " + host;
  for (auto* ai = res; ai; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (fd >= 0 && bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
        listen(fd, 512) == 0) {
      listen_fd_ = fd;
      break;
    }
    if (fd >= 0)
      close(fd);
  }
  freeaddrinfo(res);
  if (listen_fd_ < 0)
    return "cannot listen on " + host + ":" + port_text + ": " +
           std::strerror(errno);
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&ss), &len);
  port_ = ntohs(ss.ss_family == AF_INET6
                  ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                  : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  acceptor_ = std::thread([this] { accept_loop(); });
  return {};
}

void http_frontend::stop() {
  if (stopping_.exchange(true))
    return;
  if (acceptor_.joinable())
    acceptor_.join();
  if (listen_fd_ >= 0)
    close(listen_fd_);
  std::unique_lock<std::mutex> guard{mtx_};
  for (int fd : open_fds_)
    ::shutdown(fd, SHUT_RDWR); // wakes a thread blocked on its client
  // Connection threads end once their request does (bounded wait).
  idle_.wait_for(guard, std::chrono::seconds{10},
                 [this] { return open_fds_.empty(); });
}

void http_frontend::accept_loop() {
  while (!stopping_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0)
      continue;
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0)
      continue;
    std::lock_guard<std::mutex> guard{mtx_};
    if (open_fds_.size() >= max_connections_) {
      send_all(
        fd, runtime::serialize_http_response(
              error(503, "too many connections", "overloaded", "server_error"),
              false));
      close(fd);
      continue;
    }
    open_fds_.insert(fd);
    std::thread([this, fd] { serve(fd); }).detach();
  }
}

void http_frontend::serve(int fd) {
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  runtime::http_server::limits lim;
  std::string in;
  runtime::http_request req;
  runtime::http_response resp;
  int st = 0;
  char buf[8192];
  bool continued = false;
  while (st == 0) {
    auto n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) {
      st = -2;
      break;
    }
    in.append(buf, static_cast<size_t>(n));
    st = runtime::parse_http_request(in, lim, req, resp);
    // Clients such as curl hold a large body back until told to go on.
    if (st == 0 && !continued) {
      auto head_end = in.find("\r\n\r\n");
      if (head_end != std::string::npos) {
        std::string head = in.substr(0, head_end);
        std::transform(head.begin(), head.end(), head.begin(), ::tolower);
        if (head.find("\r\nexpect: 100-continue") != std::string::npos)
          send_all(fd, "HTTP/1.1 100 Continue\r\n\r\n");
        continued = true;
      }
    }
  }
  auto finish = [&] {
    ::shutdown(fd, SHUT_WR);
    std::lock_guard<std::mutex> guard{mtx_};
    open_fds_.erase(fd);
    close(fd);
    idle_.notify_all();
  };
  if (st == -2) {
    finish();
    return;
  }
  auto& requests = runtime::global_metrics().get_counter(
    "outrider_http_requests_total", "Frontend requests", {{"path", "all"}});
  requests.inc();
  if (st == 1) {
    auto models = models_();
    if (req.path == "/v1/models" && req.method == "GET") {
      json data = json::array();
      for (const auto& m : models)
        data.push_back({{"id", m},
                        {"object", "model"},
                        {"created", 0},
                        {"owned_by", "outrider"}});
      resp = json_response(200, {{"object", "list"}, {"data", data}});
    } else if (req.path == "/v1/completions" && req.method == "POST") {
      completion_request c;
      if (auto bad = parse_completion(req.body, models, c)) {
        resp = *bad;
      } else if (!c.stream) {
        auto o = dispatcher_.generate(c.params, [](auto&) { return true; });
        if (!o.ok)
          resp =
            error(o.http_status, o.error, "generation_failed", "server_error");
        else
          resp = json_response(200, {{"id", completion_id()},
                                     {"object", "text_completion"},
                                     {"created", now_s()},
                                     {"model", c.model},
                                     {"choices",
                                      {{{"index", 0},
                                        {"text", text_of(o.tokens)},
                                        {"token_ids", o.tokens},
                                        {"logprobs", nullptr},
                                        {"finish_reason", o.finish_reason}}}},
                                     {"usage", usage_of(o)}});
      } else {
        // Server-sent events: headers now, one event per chunk, [DONE].
        std::string head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream"
                           "\r\nCache-Control: no-cache\r\nConnection: "
                           "close\r\n\r\n";
        auto id = completion_id();
        auto created = now_s();
        bool alive = send_all(fd, head);
        auto chunk = [&](const std::vector<uint32_t>& toks, const json& finish,
                         const json* usage) {
          json ev{{"id", id},
                  {"object", "text_completion"},
                  {"created", created},
                  {"model", c.model},
                  {"choices",
                   {{{"index", 0},
                     {"text", text_of(toks)},
                     {"token_ids", toks},
                     {"logprobs", nullptr},
                     {"finish_reason", finish}}}}};
          if (usage)
            ev["usage"] = *usage;
          return send_all(fd, "data: " + ev.dump() + "\n\n");
        };
        auto o = dispatcher_.generate(c.params, [&](const auto& toks) {
          alive = alive && chunk(toks, nullptr, nullptr);
          return alive;
        });
        if (alive) {
          if (o.ok) {
            auto u = usage_of(o);
            chunk({}, o.finish_reason, &u);
          } else {
            json err{{"error",
                      {{"message", o.error},
                       {"type", "server_error"},
                       {"code", "generation_failed"}}}};
            send_all(fd, "data: " + err.dump() + "\n\n");
          }
          send_all(fd, "data: [DONE]\n\n");
        }
        finish();
        return;
      }
    } else if (req.path == "/v1/completions" || req.path == "/v1/models") {
      resp = error(405, "method not allowed", "method_not_allowed");
    } else {
      resp = error(404, "unknown path " + req.path, "not_found");
    }
  }
  send_all(fd, runtime::serialize_http_response(resp, req.method == "HEAD"));
  finish();
}

} // namespace outrider::router
