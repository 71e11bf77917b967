// Spans to OTLP's protobuf messages (proto/opentelemetry, pinned subset).
#include "cluster/trace/otlp_encode.hpp"

#include "opentelemetry/proto/collector/trace/v1/trace_service.pb.h"

namespace outrider::trace {

namespace {

namespace common = opentelemetry::proto::common::v1;
namespace otrace = opentelemetry::proto::trace::v1;

uint64_t unix_nanos(wall_time t) {
  auto ns =
    std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch())
      .count();
  return ns < 0 ? 0 : static_cast<uint64_t>(ns);
}

template <size_t N>
std::string bytes_of(const std::array<uint8_t, N>& id) {
  return {reinterpret_cast<const char*>(id.data()), N};
}

void put(common::KeyValue* kv, const std::string& key, const attr_value& v) {
  kv->set_key(key);
  auto* val = kv->mutable_value();
  if (const auto* s = std::get_if<std::string>(&v))
    val->set_string_value(*s);
  else if (const auto* i = std::get_if<int64_t>(&v))
    val->set_int_value(*i);
  else if (const auto* d = std::get_if<double>(&v))
    val->set_double_value(*d);
  else
    val->set_bool_value(std::get<bool>(v));
}

void fill(otrace::Span* out, const span_record& r) {
  out->set_trace_id(bytes_of(r.self.trace));
  out->set_span_id(bytes_of(r.self.span));
  if (!r.self.state.empty())
    out->set_trace_state(r.self.state);
  bool root = true;
  for (auto b : r.parent)
    root = root && b == 0;
  if (!root)
    out->set_parent_span_id(bytes_of(r.parent));
  out->set_flags(r.self.flags);
  out->set_name(r.name);
  out->set_kind(static_cast<otrace::Span::SpanKind>(r.kind));
  out->set_start_time_unix_nano(unix_nanos(r.start));
  out->set_end_time_unix_nano(unix_nanos(r.end));
  for (const auto& [k, v] : r.attributes)
    put(out->add_attributes(), k, v);
  for (const auto& e : r.events) {
    auto* ev = out->add_events();
    ev->set_time_unix_nano(unix_nanos(e.at));
    ev->set_name(e.name);
  }
  auto* st = out->mutable_status();
  if (r.error) {
    st->set_code(otrace::Status::STATUS_CODE_ERROR);
    st->set_message(r.status_message);
  }
}

} // namespace

std::string
encode_export(const tracer_settings& cfg,
              const std::vector<std::unique_ptr<span_record>>& spans) {
  opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest req;
  auto* rs = req.add_resource_spans();
  auto* res = rs->mutable_resource();
  put(res->add_attributes(), "service.name", cfg.service_name);
  for (const auto& [k, v] : cfg.resource)
    put(res->add_attributes(), k, v);
  auto* ss = rs->add_scope_spans();
  ss->mutable_scope()->set_name("outrider");
  for (const auto& r : spans)
    fill(ss->add_spans(), *r);
  return req.SerializeAsString();
}

} // namespace outrider::trace
