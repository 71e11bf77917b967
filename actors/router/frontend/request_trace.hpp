#pragma once

#include <memory>
#include <optional>
#include <string>

#include "actors/router/core/migration.hpp"
#include "cluster/trace/tracer.hpp"

namespace outrider::router {

/// A request's span in a frontend, `router.request` (SERVER): under the
/// client's `traceparent` (HTTP header or gRPC metadata) or the root of a
/// new trace at the sample ratio; a `router.tokenize` child for the text
/// work; events for the first and last token; ended with the outcome.
/// The dispatcher's spans hang under it (`hand_on`). Shared by the
/// request's callbacks, which run one at a time.
class request_trace {
 public:
  request_trace(trace::tracer& t, const std::string& traceparent,
                const std::string& tracestate, const char* api,
                trace::wall_time received)
    : tracer_(t),
      span_(t.start_entry("router.request",
                          trace::parse_traceparent(traceparent, tracestate),
                          trace::span_kind::server, received)) {
    span_.set("outrider.api", api);
  }

  /// The request's context for the dispatcher and the engines.
  void hand_on(generate_params& p) const {
    const auto& c = span_.context();
    if (!c.valid())
      return;
    p.traceparent = trace::traceparent_of(c);
    p.tracestate = c.state;
  }

  void describe(const std::string& model, bool stream, size_t prompt_tokens) {
    span_.set("gen_ai.request.model", model)
      .set("outrider.stream", stream)
      .set("gen_ai.usage.input_tokens", static_cast<int64_t>(prompt_tokens));
  }

  /// Tokenizing or rendering the prompt took [from, to].
  void tokenized(trace::wall_time from, trace::wall_time to) {
    auto s = tracer_.start_child("router.tokenize", span_.context(),
                                 trace::span_kind::internal, from);
    s.end(to);
  }

  void token() {
    if (!first_) {
      first_ = true;
      span_.event("first_token");
    }
  }

  void finish(const generate_outcome& o) {
    if (!o.tokens.empty())
      span_.event("last_token");
    span_
      .set("gen_ai.usage.output_tokens", static_cast<int64_t>(o.tokens.size()))
      .set("outrider.cached_tokens", int64_t{o.cached_tokens})
      .set("outrider.migrations", int64_t{o.migrations})
      .set("http.response.status_code", int64_t{o.http_status()});
    if (!o.worker_id.empty())
      span_.set("outrider.worker_id", o.worker_id);
    if (!o.ok)
      span_.fail(o.error);
    span_.end();
  }

  /// Answered before any generating (refused, shed, shutting down).
  void refused(int status, const std::string& why) {
    span_.set("http.response.status_code", int64_t{status});
    span_.fail(why);
    span_.end();
  }

 private:
  trace::tracer& tracer_;
  trace::span span_;
  bool first_ = false;
};

} // namespace outrider::router
