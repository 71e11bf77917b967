#include "runtime/status.hpp"

#include <nlohmann/json.hpp>

namespace outrider::runtime {

health_state::health_state(std::string role) : role_(std::move(role)) {}

void health_state::set_ready(bool ready) {
  ready_.store(ready);
}

void health_state::begin_shutdown() {
  shutting_down_.store(true);
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
  doc["status"] =
    shutting_down() ? "shutting_down" : (ready() ? "ready" : "starting");
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
    http_([this](const http_request& r) { return handle(r); }) {}

std::string status_server::start(const std::string& host, uint16_t port) {
  return http_.start(host, port);
}

void status_server::add_route(
  const std::string& path, std::function<http_response(const http_request&)> h,
  bool any_method) {
  std::lock_guard<std::mutex> guard{routes_mtx_};
  routes_[path] = {std::move(h), any_method};
}

http_response status_server::handle(const http_request& req) {
  requests_.inc();
  http_response r;
  std::function<http_response(const http_request&)> extra;
  bool any_method = false;
  {
    std::lock_guard<std::mutex> guard{routes_mtx_};
    if (auto i = routes_.find(req.path); i != routes_.end())
      std::tie(extra, any_method) = i->second;
  }
  if (extra && any_method)
    return extra(req);
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
    return extra(req);
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
