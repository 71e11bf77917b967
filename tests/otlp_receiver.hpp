#pragma once

// An OTLP/HTTP trace receiver for tests, built from the pinned OTLP protos
// (proto/opentelemetry): it takes `POST /v1/traces` with a binary
// `ExportTraceServiceRequest`, as a collector does, and keeps the spans.
// Bodies it cannot parse are answered 400 and counted.

#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "opentelemetry/proto/collector/trace/v1/trace_service.pb.h"
#include "runtime/http/server.hpp"

namespace outrider::test {

struct otlp_receiver {
  using span_t = opentelemetry::proto::trace::v1::Span;
  struct received {
    span_t span;
    std::string service; // the resource's service.name
  };

  otlp_receiver()
    : server("otlp",
             runtime::http_server::handler{
               [this](const runtime::http_request& r) { return take(r); }}) {
    if (server.start("127.0.0.1", 0))
      throw std::runtime_error("otlp receiver: cannot bind");
  }
  ~otlp_receiver() { server.stop(std::chrono::milliseconds{500}); }

  std::string url() const {
    return "http://127.0.0.1:" + std::to_string(server.port());
  }

  std::vector<received> spans() const {
    std::lock_guard lk{mtx};
    return got;
  }
  int bad_bodies() const {
    std::lock_guard lk{mtx};
    return bad;
  }
  int requests() const {
    std::lock_guard lk{mtx};
    return posts;
  }

  static std::string hex(const std::string& bytes) {
    static constexpr char digits[] = "0123456789abcdef";
    std::string out;
    for (unsigned char c : bytes) {
      out += digits[c >> 4];
      out += digits[c & 15];
    }
    return out;
  }

  static std::string attribute(const span_t& s, const std::string& key) {
    for (const auto& kv : s.attributes())
      if (kv.key() == key) {
        const auto& v = kv.value();
        if (v.has_string_value())
          return v.string_value();
        if (v.has_int_value())
          return std::to_string(v.int_value());
        if (v.has_bool_value())
          return v.bool_value() ? "true" : "false";
        if (v.has_double_value())
          return std::to_string(v.double_value());
      }
    return {};
  }

 private:
  runtime::http_response take(const runtime::http_request& r) {
    namespace col = opentelemetry::proto::collector::trace::v1;
    std::lock_guard lk{mtx};
    ++posts;
    col::ExportTraceServiceRequest req;
    if (r.method != "POST" || r.path != "/v1/traces" ||
        r.headers.count("content-type") == 0 ||
        r.headers.at("content-type") != "application/x-protobuf" ||
        !req.ParseFromString(r.body)) {
      ++bad;
      return {400, "text/plain", "not an OTLP/HTTP protobuf export\n", {}};
    }
    for (const auto& rs : req.resource_spans()) {
      std::string service;
      for (const auto& kv : rs.resource().attributes())
        if (kv.key() == "service.name")
          service = kv.value().string_value();
      for (const auto& ss : rs.scope_spans())
        for (const auto& s : ss.spans())
          got.push_back({s, service});
    }
    col::ExportTraceServiceResponse resp;
    return {200, "application/x-protobuf", resp.SerializeAsString(), {}};
  }

  mutable std::mutex mtx;
  std::vector<received> got; // guarded by mtx
  int bad = 0;
  int posts = 0;

 public:
  runtime::http_server server; // last: stopped before the rest goes
};

} // namespace outrider::test
