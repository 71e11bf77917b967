#include "actors/router/http_frontend.hpp"

#include <thread>

#include <spdlog/spdlog.h>

namespace outrider::router {

namespace {

const std::string shutting_down = "the router is shutting down";

runtime::http_response busy(const std::string& why) {
  auto r = api_error(503, why, "overloaded", "server_error");
  r.headers["Retry-After"] = "1";
  return r;
}

} // namespace

http_frontend::http_frontend(dispatcher& d,
                             std::function<std::vector<std::string>()> models,
                             frontend_config cfg)
  : dispatcher_(d), models_(std::move(models)), cfg_(cfg),
    server_("frontend",
            runtime::http_server::async_handler{
              [this](std::shared_ptr<runtime::http_exchange> ex) {
                serve(std::move(ex));
              }},
            cfg.http) {}

http_frontend::~http_frontend() {
  stop(std::chrono::milliseconds{0});
}

caf::error http_frontend::start(const std::string& host, uint16_t port) {
  if (cfg_.tls)
    if (auto err = server_.use_tls(cfg_.tls->cert, cfg_.tls->key, cfg_.tls->ca))
      return err;
  return server_.start(host, port);
}

void http_frontend::drain() {
  draining_ = true;
}

void http_frontend::stop(std::chrono::milliseconds grace) {
  draining_ = true;
  auto deadline = std::chrono::steady_clock::now() + grace;
  while (in_flight_.load() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds{10});
  if (auto left = in_flight_.load(); left > 0)
    spdlog::warn("frontend: ending {} request(s) still in flight", left);
  // The rest end now, with an error event; their engine requests are
  // cancelled. Then the connections close.
  cut_ = true;
  dispatcher_.cancel_all(std::chrono::milliseconds{1000});
  server_.stop(); // waits for handlers to release their exchanges
}

bool http_frontend::admit() {
  if (in_flight_.fetch_add(1) < cfg_.max_in_flight)
    return true;
  in_flight_.fetch_sub(1);
  return false;
}

// On an I/O thread: nothing here blocks (the dispatcher answers in
// callbacks).
void http_frontend::serve(std::shared_ptr<runtime::http_exchange> ex) {
  static auto& requests = runtime::global_metrics().get_counter(
    "outrider_http_requests_total", "Frontend requests", {{"path", "all"}});
  requests.inc();
  const auto& req = ex->request();
  if (req.path == "/v1/models" && req.method == "GET")
    return ex->respond(models_response(models_()));
  if (req.path != "/v1/completions" && req.path != "/v1/models")
    return ex->respond(api_error(404, "unknown path " + req.path, "not_found"));
  if (req.method != "POST" || req.path != "/v1/completions")
    return ex->respond(
      api_error(405, "method not allowed", "method_not_allowed"));
  if (draining_.load()) {
    auto r = api_error(503, shutting_down, "shutting_down", "server_error");
    r.headers["Connection"] = "close";
    return ex->respond(std::move(r));
  }
  completion_request c;
  if (auto bad = parse_completion(req.body, models_(), cfg_.api, c))
    return ex->respond(std::move(*bad));
  if (!admit())
    return ex->respond(busy("too many requests in flight"));
  if (c.stream)
    stream(std::move(ex), std::move(c));
  else
    generate(std::move(ex), std::move(c));
}

void http_frontend::generate(std::shared_ptr<runtime::http_exchange> ex,
                             completion_request c) {
  auto* raw = ex.get();
  auto params = c.params;
  dispatcher_.generate(
    std::move(params),
    [this, raw](const std::vector<uint32_t>&) { return wanted(*raw); },
    [this, ex, c = std::move(c)](generate_outcome o) {
      if (cut_.load())
        ex->respond(
          api_error(503, shutting_down, "shutting_down", "server_error"));
      else if (ex->gone()) {
        // nobody to answer (the engine request was cancelled)
      } else if (!o.ok)
        ex->respond(api_error(o.http_status, o.error, "generation_failed",
                              "server_error"));
      else
        ex->respond(completion_response(completion_id(), c.model, o));
      finished();
    });
}

// Server-sent events. The headers wait for the first tokens: a request that
// fails before any (no worker, refused by the engine, timed out) gets its
// HTTP status, as OpenAI's API answers, instead of a 200 and an error
// event. Then one event per chunk and [DONE]; while a write is in flight,
// events queue and go out together. The token callbacks and the last one
// come one at a time, in order, so `begun` needs no lock.
void http_frontend::stream(std::shared_ptr<runtime::http_exchange> ex,
                           completion_request c) {
  auto id = std::make_shared<const std::string>(completion_id());
  auto created = now_seconds();
  auto* raw = ex.get();
  auto params = c.params;
  auto events =
    std::make_shared<const token_event_writer>(*id, created, c.model);
  auto begun = std::make_shared<bool>(false);
  auto begin = [raw, begun] {
    if (!*begun)
      raw->begin_stream(200, "text/event-stream",
                        {{"Cache-Control", "no-cache"}});
    *begun = true;
  };
  dispatcher_.generate(
    std::move(params),
    [this, raw, events, begin](const auto& toks) {
      if (!wanted(*raw))
        return false;
      begin();
      return raw->send((*events)(toks));
    },
    [this, ex, id, created, begun, begin, model = c.model](generate_outcome o) {
      if (ex->gone()) {
        // nobody to answer (the engine request was cancelled)
      } else if (!*begun && (cut_.load() || !o.ok)) {
        ex->respond(
          cut_.load()
            ? api_error(503, shutting_down, "shutting_down", "server_error")
            : api_error(o.http_status, o.error, "generation_failed",
                        "server_error"));
      } else {
        begin();
        if (cut_.load())
          ex->send(error_event(shutting_down));
        else if (o.ok)
          ex->send(
            completion_event(*id, created, model, {}, &o.finish_reason, &o));
        else
          ex->send(error_event(o.error));
        ex->send("data: [DONE]\n\n");
        ex->end();
      }
      finished();
    });
}

} // namespace outrider::router
