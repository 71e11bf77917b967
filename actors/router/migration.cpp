#include "actors/router/migration.hpp"

namespace outrider::router {

generate_outcome run_with_migration(
  const generate_params& p, int migration_limit, attempt_seams& seams,
  const std::function<bool(const std::vector<uint32_t>&)>& on_tokens) {
  generate_outcome out;
  out.prompt_tokens = static_cast<uint32_t>(p.prompt.size());
  std::vector<std::string> exclude;
  for (int attempt = 0;; ++attempt) {
    auto req = std::make_shared<route_request>();
    req->tokens = p.prompt;
    req->tokens.insert(req->tokens.end(), out.tokens.begin(), out.tokens.end());
    req->exclude = exclude;
    auto d = seams.place(req);
    if (!d.ok) {
      out.http_status = 503;
      out.error = d.error;
      return out;
    }
    out.worker_id = d.worker_id;
    auto left = p.max_tokens - static_cast<uint32_t>(out.tokens.size());
    auto r = seams.stream(d, req->tokens, left, attempt, out, on_tokens);
    seams.release(d);
    switch (r.end) {
    case attempt_end::finished:
      out.ok = true;
      if (out.finish_reason.empty())
        out.finish_reason = "length";
      return out;
    case attempt_end::cancelled:
      out.http_status = 499;
      out.error = "cancelled by the client";
      return out;
    case attempt_end::unavailable:
      if (out.tokens.size() < p.max_tokens && attempt < migration_limit &&
          seams.may_migrate()) {
        seams.migrating(d, out);
        ++out.migrations;
        exclude.push_back(d.worker_id);
        continue;
      }
      [[fallthrough]];
    case attempt_end::invalid:
    case attempt_end::failed:
      out.http_status = r.end == attempt_end::invalid ? 400 : 502;
      out.error = "worker " + d.worker_id + ": " + r.message;
      return out;
    }
  }
}

} // namespace outrider::router
