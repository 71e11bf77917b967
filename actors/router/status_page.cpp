#include "actors/router/status_page.hpp"

#include <nlohmann/json.hpp>

namespace outrider::router {

namespace {

// Asks the router actor's current incarnation for a JSON document; nullopt
// while it restarts or when it does not answer within a second.
template <class Atom>
std::optional<std::string>
ask_router(caf::actor_system& sys,
           const runtime::slot_ptr<kv_router_actor>& brain) {
  std::optional<std::string> out;
  if (auto b = brain->get()) {
    caf::scoped_actor self{sys};
    self->request(b, std::chrono::seconds{1}, Atom::value)
      .receive([&](const std::string& json) { out = json; },
               [&](caf::error&) {});
  }
  return out;
}

} // namespace

void add_index_route(runtime::role_context& ctx,
                     runtime::slot_ptr<kv_router_actor> brain) {
  auto* sys = &ctx.sys;
  ctx.status.add_route(
    "/debug/index", [sys, brain](const runtime::http_request&) {
      runtime::http_response r;
      r.content_type = "application/json";
      if (auto json = ask_router<index_atom>(*sys, brain)) {
        r.body = *json + "\n";
      } else {
        r.status = 503;
        r.body = "{\"error\":\"the router actor is restarting\"}\n";
      }
      return r;
    });
}

void add_status_page(runtime::role_context& ctx,
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
  ctx.status.add_route(
    "/debug/status", [sys, brain, requests](const runtime::http_request&) {
      runtime::http_response r;
      r.content_type = "application/json";
      r.headers["Cache-Control"] = "no-store";
      nlohmann::json doc;
      if (auto json = ask_router<status_atom>(*sys, brain))
        doc = nlohmann::json::parse(*json, nullptr, false);
      if (!doc.is_object())
        doc = {{"error", "the router actor is restarting"},
               {"workers", nlohmann::json::array()},
               {"decisions", nlohmann::json::array()}};
      auto extra = requests(); // not a temporary in the loop below
      for (auto& [k, v] : extra.items())
        doc[k] = v;
      r.body = doc.dump() + "\n";
      return r;
    });
}

} // namespace outrider::router
