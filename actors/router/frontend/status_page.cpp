#include "actors/router/frontend/status_page.hpp"

#include <nlohmann/json.hpp>

#include "runtime/ask.hpp"

namespace outrider::router {

namespace {

using respond_fn = std::function<void(runtime::http_response)>;

// Asks the router actor's current incarnation for a JSON document without
// waiting: `done` gets it, or nullopt while the actor restarts or when it
// does not answer within a second.
template <class Atom>
void ask_router(caf::actor_system& sys,
                const runtime::slot_ptr<kv_router_actor>& brain,
                std::function<void(std::optional<std::string>)> done) {
  auto b = brain->get();
  if (!b) {
    done(std::nullopt);
    return;
  }
  runtime::ask_async<std::string>(
    sys, b, std::chrono::seconds{1},
    [done](const std::string& json) { done(json); },
    [done](const caf::error&) { done(std::nullopt); }, Atom::value);
}

} // namespace

void add_index_route(runtime::role_env& ctx,
                     runtime::slot_ptr<kv_router_actor> brain) {
  auto* sys = &ctx.sys;
  ctx.status.add_async_route(
    "/debug/index",
    [sys, brain](const runtime::http_request&, respond_fn respond) {
      ask_router<index_atom>(
        *sys, brain, [respond](std::optional<std::string> json) {
          runtime::http_response r;
          r.content_type = "application/json";
          if (json) {
            r.body = *json + "\n";
          } else {
            r.status = 503;
            r.body = "{\"error\":\"the router actor is restarting\"}\n";
          }
          respond(std::move(r));
        });
    });
}

void add_status_page(runtime::role_env& ctx,
                     runtime::slot_ptr<kv_router_actor> brain,
                     std::function<nlohmann::json()> requests) {
  auto* sys = &ctx.sys;
  ctx.status.add_route("/", [](const runtime::http_request&) {
    runtime::http_response r;
    r.content_type = "text/html; charset=utf-8";
    r.body = status_page_html();
    // Nothing from elsewhere: no external assets, nothing framed.
    r.headers["Content-Security-Policy"] =
      "default-src 'none'; script-src 'unsafe-inline'; "
      "style-src 'unsafe-inline'; connect-src 'self'; frame-ancestors 'none'";
    r.headers["Cache-Control"] = "no-store";
    return r;
  });
  ctx.status.add_async_route(
    "/debug/status",
    [sys, brain, requests](const runtime::http_request&, respond_fn respond) {
      ask_router<status_atom>(
        *sys, brain, [requests, respond](std::optional<std::string> json) {
          nlohmann::json doc;
          if (json)
            doc = nlohmann::json::parse(*json, nullptr, false);
          if (!doc.is_object())
            doc = {{"error", "the router actor is restarting"},
                   {"workers", nlohmann::json::array()},
                   {"decisions", nlohmann::json::array()}};
          auto extra = requests(); // not a temporary in the loop below
          for (auto& [k, v] : extra.items())
            doc[k] = v;
          runtime::http_response r;
          r.content_type = "application/json";
          r.headers["Cache-Control"] = "no-store";
          r.body = doc.dump() + "\n";
          respond(std::move(r));
        });
    });
}

} // namespace outrider::router
