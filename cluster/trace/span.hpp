#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "cluster/trace/trace_context.hpp"

namespace outrider::trace {

/// OTLP's span kinds (trace.proto, `Span.SpanKind`).
/// OTLP's SpanKind values (producer and consumer: a message published on
/// the NATS event plane and its receipt).
enum class span_kind : int {
  internal = 1,
  server = 2,
  client = 3,
  producer = 4,
  consumer = 5
};

using attr_value = std::variant<std::string, int64_t, double, bool>;
using wall_time = std::chrono::system_clock::time_point;

/// What a finished span hands the exporter.
struct span_record {
  trace_context self; ///< its trace, its own id, flags, tracestate
  span_id parent{};   ///< all zero for a trace's root
  std::string name;
  span_kind kind = span_kind::internal;
  wall_time start;
  wall_time end;
  std::vector<std::pair<std::string, attr_value>> attributes;
  struct event {
    wall_time at;
    std::string name;
  };
  std::vector<event> events;
  bool error = false;
  std::string status_message;
};

class tracer;

/// One stage of a request, recorded when its trace is sampled and a
/// collector is configured; otherwise a cheap handle that only carries the
/// context it was started under, so the next hop still gets the client's
/// `traceparent`. Not thread-safe: a request's stages run one at a time.
/// Ended by `end()` or, at the latest, its destructor.
class span {
 public:
  span() = default;
  span(span&&) noexcept = default;
  span& operator=(span&& other) noexcept;
  ~span();

  bool recording() const { return rec_ != nullptr; }
  /// What a child or the next hop hangs under: this span (recording), or
  /// the context it was started under (not recording; may be invalid).
  const trace_context& context() const { return rec_ ? rec_->self : under_; }

  span& set(std::string key, attr_value v);
  span& set(std::string key, const char* v) {
    return set(std::move(key), std::string(v));
  }
  void event(std::string name, wall_time at = std::chrono::system_clock::now());
  /// Marks it failed (OTLP status ERROR) with a reason.
  void fail(std::string message);
  void end(wall_time at = std::chrono::system_clock::now());

 private:
  friend class tracer;
  std::shared_ptr<tracer> owner_;
  std::unique_ptr<span_record> rec_;
  trace_context under_;
};

} // namespace outrider::trace
