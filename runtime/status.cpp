#include "runtime/status.hpp"

#include <future>

#include <nlohmann/json.hpp>

namespace outrider::runtime {

namespace {

// Probes and scrapes are small: tight limits, short deadlines.
http_limits status_limits() {
  http_limits l;
  l.header_bytes = 8192;
  l.body_bytes = 1 << 20;
  l.max_connections = 1024;
  // Probes get through when clients hold every ordinary slot: the pod's
  // liveness must not fail because someone opened 1,024 connections.
  l.reserved_connections = 64;
  l.reserved_paths = {"/live", "/ready", "/health"};
  // The probes may use more of the process's descriptors than the
  // frontend (which leaves 128): they are what says the process is alive.
  l.fd_reserve = 16;
  l.read_timeout = std::chrono::seconds{5};
  l.idle_timeout = std::chrono::seconds{30};
  l.send_timeout = std::chrono::seconds{10};
  l.io_threads = 1;
  return l;
}

} // namespace

health_state::health_state(std::string role) : role_(std::move(role)) {}

void health_state::set_ready(bool ready) {
  ready_.store(ready);
}

void health_state::begin_shutdown() {
  shutting_down_.store(true);
}

void health_state::set_impaired(const std::string& part, bool impaired) {
  std::lock_guard<std::mutex> guard{mtx_};
  if (impaired)
    impaired_parts_.insert(part);
  else
    impaired_parts_.erase(part);
  impaired_.store(static_cast<int>(impaired_parts_.size()));
}

void health_state::set_component(const std::string& name,
                                 const std::string& state,
                                 const std::string& detail) {
  std::lock_guard<std::mutex> guard{mtx_};
  components_[name] = component{state, detail};
}

std::string health_state::to_json() const {
  nlohmann::json doc;
  doc["role"] = role_;
  doc["status"] = shutting_down() ? "shutting_down"
                  : ready()       ? "ready"
                  : ready_.load() ? "impaired"
                                  : "starting";
  doc["components"] = nlohmann::json::object();
  std::lock_guard<std::mutex> guard{mtx_};
  for (const auto& [name, c] : components_) {
    auto& entry = doc["components"][name];
    entry["state"] = c.state;
    if (!c.detail.empty())
      entry["detail"] = c.detail;
  }
  return doc.dump() + "\n";
}

status_server::status_server(std::shared_ptr<health_state> health,
                             metrics_registry& metrics)
  : health_(std::move(health)), metrics_(metrics),
    requests_(metrics.get_counter("outrider_status_requests_total",
                                  "Requests to the status server")),
    http_("status",
          http_server::async_handler{[this](std::shared_ptr<http_exchange> ex) {
            serve(std::move(ex));
          }},
          status_limits()) {}

caf::error status_server::start(const std::string& host, uint16_t port) {
  return http_.start(host, port);
}

void status_server::stop() {
  http_.stop(std::chrono::seconds{2});
  slow_.stop();
}

status_server::route status_server::route_of(const std::string& path) {
  std::lock_guard<std::mutex> guard{routes_mtx_};
  if (auto i = routes_.find(path); i != routes_.end())
    return i->second;
  return {};
}

namespace {

http_response busy(const char* why) {
  auto r = http_error(503, why);
  r.headers["Retry-After"] = "1";
  return r;
}

} // namespace

void status_server::serve(std::shared_ptr<http_exchange> ex) {
  requests_.inc();
  auto extra = route_of(ex->request().path);
  if (auto r = answer_here(ex->request(), extra)) {
    ex->respond(std::move(*r)); // probes and metrics: right here
    return;
  }
  if (extra.async) {
    if (async_->stopped) {
      ex->respond(busy("the status server is stopping"));
      return;
    }
    if (async_->in_flight.fetch_add(1) >= max_async) {
      async_->in_flight.fetch_sub(1);
      ex->respond(busy("too many status requests in flight"));
      return;
    }
    // The count drops when the responder goes, answered or not.
    std::shared_ptr<void> ticket{
      nullptr, [a = async_](void*) { a->in_flight.fetch_sub(1); }};
    extra.async(ex->request(),
                [ex, ticket](http_response r) { ex->respond(std::move(r)); });
    return;
  }
  auto job = [ex, h = extra.sync] { ex->respond(h(ex->request())); };
  if (!slow_.try_run(job))
    ex->respond(busy("the status server's worker is busy"));
}

void status_server::add_route(
  const std::string& path, std::function<http_response(const http_request&)> h,
  bool any_method) {
  std::lock_guard<std::mutex> guard{routes_mtx_};
  routes_[path] = route{std::move(h), nullptr, any_method};
}

void status_server::add_async_route(const std::string& path,
                                    async_route_handler h, bool any_method) {
  std::lock_guard<std::mutex> guard{routes_mtx_};
  routes_[path] = route{nullptr, std::move(h), any_method};
}

http_response status_server::handle(const http_request& req) {
  requests_.inc();
  auto extra = route_of(req.path);
  if (auto r = answer_here(req, extra))
    return std::move(*r);
  if (extra.sync)
    return extra.sync(req);
  auto answer = std::make_shared<std::promise<http_response>>();
  auto got = answer->get_future();
  extra.async(req,
              [answer](http_response r) { answer->set_value(std::move(r)); });
  if (got.wait_for(std::chrono::seconds{10}) != std::future_status::ready)
    return http_error(504, "the asynchronous route did not answer");
  return got.get();
}

std::optional<http_response> status_server::answer_here(const http_request& req,
                                                        const route& extra) {
  http_response r;
  if (extra && extra.any_method)
    return std::nullopt;
  auto known = req.path == "/live" || req.path == "/ready" ||
               req.path == "/health" || req.path == "/metrics" || extra;
  if (!known) {
    r.status = 404;
    r.content_type = "application/json";
    r.body = R"({"error":{"code":404,"message":"unknown path; try /live, )"
             R"(/ready, /health or /metrics"}})"
             "\n";
    return r;
  }
  if (req.method != "GET" && req.method != "HEAD") {
    r.status = 405;
    r.headers["Allow"] = "GET, HEAD";
    r.content_type = "application/json";
    r.body = R"({"error":{"code":405,"message":"use GET or HEAD"}})"
             "\n";
    return r;
  }
  if (extra)
    return std::nullopt;
  if (req.path == "/live") {
    r.body = "live\n";
  } else if (req.path == "/ready") {
    bool ok = health_->ready();
    r.status = ok ? 200 : 503;
    r.body = ok
               ? "ready\n"
               : (health_->shutting_down() ? "shutting down\n" : "not ready\n");
  } else if (req.path == "/health") {
    r.status = health_->ready() ? 200 : 503;
    r.content_type = "application/json";
    r.body = health_->to_json();
  } else {
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.body = metrics_.render();
  }
  return r;
}

} // namespace outrider::runtime
