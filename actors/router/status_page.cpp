#include "actors/router/status_page.hpp"

#include <nlohmann/json.hpp>

namespace outrider::router {

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
      if (auto b = brain->get()) {
        caf::scoped_actor self{*sys};
        self->request(b, std::chrono::seconds{1}, status_atom::value)
          .receive(
            [&](const std::string& json) {
              doc = nlohmann::json::parse(json, nullptr, false);
            },
            [&](caf::error&) {});
      }
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
