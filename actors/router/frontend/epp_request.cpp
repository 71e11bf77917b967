#include "actors/router/dispatch/request_identity.hpp"
#include "actors/router/frontend/epp_stream.hpp"
#include "actors/router/frontend/flow_identity.hpp"

namespace outrider::router {

using epp_state = epp_server::state;

std::optional<runtime::http_response>
epp_route_request(epp_state& st,
                  const std::map<std::string, std::string>& headers,
                  const std::string& body, route_request& req) {
  std::string why;
  auto who =
    flow_identity_of(headers, st.cfg.objectives, st.cfg.session_header, &why);
  if (!who)
    return api_error(400, why, "invalid_priority");
  req.flow = std::move(who->flow);
  req.band = who->band;
  req.session = std::move(who->session);
  auto p = headers.find(":path");
  std::string path = p == headers.end() ? "" : p->second;
  path = path.substr(0, path.find('?'));
  bool chat = path == "/v1/chat/completions";
  if (body.empty() || (!chat && path != "/v1/completions"))
    return std::nullopt;
  const auto& tools = st.cfg.prompts;
  completion_request c;
  if (auto bad = read_request(tools, st.models(), chat, body, c))
    return bad;
  if (auto bad = render_prompt(tools, c))
    return bad;
  req.tokens = std::move(c.params.prompt);
  req.identity =
    prompt_identity_of(c.params.lora, c.params.cache_salt, c.params.media);
  return std::nullopt;
}

} // namespace outrider::router
