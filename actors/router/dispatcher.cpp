#include "actors/router/dispatcher.hpp"

#include <chrono>

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include "openengine.grpc.pb.h"
#include "runtime/metrics.hpp"

namespace outrider::router {

namespace oe = openengine::v1;

namespace {

using clock_type = std::chrono::steady_clock;

double seconds(clock_type::duration d) {
  return std::chrono::duration<double>(d).count();
}

} // namespace

dispatcher::dispatcher(caf::actor_system& sys, kv_router_actor router,
                       int migration_limit)
  : sys_(sys), router_(std::move(router)), migration_limit_(migration_limit) {}

std::shared_ptr<grpc::Channel>
dispatcher::channel_for(const std::string& endpoint) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto& ch = channels_[endpoint];
  if (!ch)
    ch = grpc::CreateChannel(endpoint, grpc::InsecureChannelCredentials());
  return ch;
}

generate_outcome dispatcher::generate(
  const generate_params& p,
  const std::function<bool(const std::vector<uint32_t>&)>& on_tokens) {
  auto& m = runtime::global_metrics();
  static auto& ttft =
    m.get_histogram("outrider_router_ttft_seconds", "Time to the first token",
                    runtime::metrics_registry::latency_bounds());
  static auto& itl = m.get_histogram(
    "outrider_router_inter_token_seconds", "Time between streamed tokens",
    runtime::metrics_registry::latency_bounds());
  static auto& overhead = m.get_histogram(
    "outrider_router_overhead_seconds",
    "Router time per request: hashing, index lookup, selection",
    {0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.005});
  static auto& migrations = m.get_counter("outrider_router_migrations_total",
                                          "Streams moved to another worker");
  generate_outcome out;
  out.prompt_tokens = static_cast<uint32_t>(p.prompt.size());
  auto t0 = clock_type::now();
  auto last_token = t0;
  std::vector<std::string> exclude;
  for (int attempt = 0;; ++attempt) {
    auto req = std::make_shared<route_request>();
    req->tokens = p.prompt;
    req->tokens.insert(req->tokens.end(), out.tokens.begin(), out.tokens.end());
    req->exclude = exclude;
    route_decision d;
    auto tp = clock_type::now();
    {
      caf::scoped_actor self{sys_};
      self
        ->request(router_, std::chrono::seconds{5}, place_atom::value,
                  std::shared_ptr<const route_request>{req})
        .receive([&](route_decision& r) { d = std::move(r); },
                 [&](caf::error& e) { d.error = sys_.render(e); });
    }
    overhead.observe(seconds(clock_type::now() - tp));
    if (!d.ok) {
      out.http_status = 503;
      out.error = d.error;
      return out;
    }
    if (attempt == 0)
      out.cached_tokens = 0;
    out.worker_id = d.worker_id;
    grpc::ClientContext ctx;
    ctx.AddMetadata("openengine-target-dp-rank", std::to_string(d.rank));
    oe::GenerateRequest greq;
    greq.mutable_token_ids()->mutable_ids()->Add(req->tokens.begin(),
                                                 req->tokens.end());
    greq.mutable_stopping()->set_max_tokens(
      p.max_tokens - static_cast<uint32_t>(out.tokens.size()));
    if (p.temperature)
      greq.mutable_sampling()->set_temperature(*p.temperature);
    auto stub = oe::Inference::NewStub(channel_for(d.endpoint));
    auto reader = stub->Generate(&ctx, greq);
    oe::GenerateResponse resp;
    bool prefilled = false;
    bool cancelled = false;
    while (reader->Read(&resp)) {
      if (resp.has_token()) {
        std::vector<uint32_t> chunk;
        for (const auto& t : resp.token().tokens())
          chunk.push_back(t.token_id());
        auto now = clock_type::now();
        if (out.tokens.empty())
          ttft.observe(seconds(now - t0));
        else
          itl.observe(seconds(now - last_token));
        last_token = now;
        if (!prefilled) {
          prefilled = true;
          caf::anon_send(router_, prefilled_atom::value, d.key);
        }
        out.tokens.insert(out.tokens.end(), chunk.begin(), chunk.end());
        if (!on_tokens(chunk)) {
          cancelled = true;
          ctx.TryCancel();
          break;
        }
      } else if (resp.has_finished()) {
        out.finish_reason = resp.finished().reason() == oe::FINISH_REASON_STOP
                              ? "stop"
                              : "length";
        if (attempt == 0 && resp.usage().has_cached_prompt_tokens())
          out.cached_tokens = resp.usage().cached_prompt_tokens();
      }
    }
    auto st = reader->Finish();
    caf::anon_send(router_, release_atom::value, d.key);
    if (cancelled) {
      out.http_status = 499;
      out.error = "cancelled by the client";
      return out;
    }
    if (st.ok()) {
      out.ok = true;
      if (out.finish_reason.empty())
        out.finish_reason = "length";
      return out;
    }
    bool migratable = st.error_code() == grpc::StatusCode::UNAVAILABLE &&
                      out.tokens.size() < p.max_tokens;
    if (!migratable || attempt >= migration_limit_) {
      out.http_status =
        st.error_code() == grpc::StatusCode::INVALID_ARGUMENT ? 400 : 502;
      out.error = "worker " + d.worker_id + ": " + st.error_message();
      return out;
    }
    migrations.inc();
    ++out.migrations;
    spdlog::warn("router: stream on {} broke after {} tokens; migrating",
                 d.worker_id, out.tokens.size());
    exclude.push_back(d.worker_id);
  }
}

} // namespace outrider::router
