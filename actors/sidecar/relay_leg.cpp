// The engine side of a relayed request, shared by the relay's two services
// (`Inference.Generate` and `RelayMux.Relay`): how it starts (its id, its
// span, the trace context the engine gets) and how it ends (the status the
// router gets, counted, and an abort where the engine may still run).

#include "actors/sidecar/relay_impl.hpp"

namespace outrider::sidecar {

namespace {

using grpc::Status;
using grpc::StatusCode;

// A broken transport, not a verdict on the request: worth migrating.
bool broke(const Status& st) {
  switch (st.error_code()) {
  case StatusCode::UNAVAILABLE:
  case StatusCode::UNKNOWN:
  case StatusCode::INTERNAL:
  case StatusCode::ABORTED:
  case StatusCode::CANCELLED:
    return true;
  default:
    return false;
  }
}

} // namespace

relay_leg_start
relay::impl::begin_leg(const openengine::v1::GenerateRequest& in,
                       engine::dialect d, const engine::call_target& target) {
  m.inflight.add(1);
  relay_leg_start out{
    in.request_id().empty() ? "relay-" + std::to_string(next_id.fetch_add(1))
                            : in.request_id(),
    cfg.tracer->start_entry(
      "relay.generate",
      trace::parse_traceparent(target.traceparent, target.tracestate),
      trace::span_kind::server),
    target};
  // The engine's work hangs under this span (or under the router's
  // context, passed on as it came, when this one is not recorded).
  if (const auto& tc = out.span.context(); tc.valid()) {
    out.to_engine.traceparent = trace::traceparent_of(tc);
    out.to_engine.tracestate = tc.state;
  } else {
    out.to_engine.traceparent.clear();
    out.to_engine.tracestate.clear();
  }
  out.span.set("outrider.request_id", out.id)
    .set("outrider.engine_protocol", engine::to_string(d));
  return out;
}

Status relay::impl::verdict(bool client_gone, const Status& engine_status,
                            const std::string& id, uint32_t tokens) {
  if (client_gone) {
    // Dropping a stream does not stop a vLLM request: abort it.
    abort_on_engine(id);
    m.cancelled.inc();
    return {StatusCode::CANCELLED, "cancelled by the client"};
  }
  if (engine_status.ok()) {
    m.ok.inc();
    return engine_status;
  }
  if (engine_status.error_code() == StatusCode::DEADLINE_EXCEEDED) {
    // The router's deadline passed: the engine may still be generating.
    abort_on_engine(id);
    m.failed.inc();
    return engine_status;
  }
  if (broke(engine_status)) {
    m.broken.inc();
    return {StatusCode::UNAVAILABLE,
            "engine stream broke after " + std::to_string(tokens) +
              " tokens: " + engine_status.error_message()};
  }
  m.failed.inc();
  return engine_status; // the engine's verdict on the request
}

void relay::impl::end_leg(trace::span& span, const Status& st,
                          uint32_t tokens) {
  span.set("outrider.output_tokens", int64_t{tokens})
    .set("rpc.grpc.status_code", static_cast<int64_t>(st.error_code()));
  if (!st.ok())
    span.fail(st.error_message());
  span.end();
}

std::optional<Status> relay::impl::over_limit() {
  if (m.inflight.value() < static_cast<double>(cfg.max_streams))
    return std::nullopt;
  m.refused.inc();
  return Status{StatusCode::RESOURCE_EXHAUSTED,
                "the relay carries " + std::to_string(cfg.max_streams) +
                  " streams already (--relay-max-streams)"};
}

} // namespace outrider::sidecar
