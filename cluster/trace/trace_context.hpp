#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace outrider::trace {

using trace_id = std::array<uint8_t, 16>;
using span_id = std::array<uint8_t, 8>;

/// W3C Trace Context (Level 1): where a request is in a trace. `span` is
/// the span a callee's work hangs under (the `parent-id` of a
/// `traceparent`); `state` the vendors' `tracestate`, passed on untouched.
struct trace_context {
  trace_id trace{};
  span_id span{};
  uint8_t flags = 0;
  std::string state;

  /// Both ids set (an all-zero id is invalid by the specification).
  bool valid() const;
  /// The `sampled` flag (bit 0): the caller records this trace.
  bool sampled() const { return (flags & 1) != 0; }
};

/// Reads a `traceparent` header (and its `tracestate`) as the
/// specification asks of a receiver: version 00 is exactly
/// `00-<32 hex>-<16 hex>-<2 hex>`, lowercase; a later version may carry
/// more after a `-`, which is ignored; version ff, uppercase hex, all-zero
/// ids or any other shape is no context at all (the request starts a new
/// trace). A `tracestate` longer than 512 bytes, with more than 32 members
/// or a byte outside printable ASCII is dropped (the specification lets a
/// receiver discard it).
std::optional<trace_context>
parse_traceparent(std::string_view traceparent,
                  std::string_view tracestate = {});

/// `00-<trace>-<span>-<flags>`.
std::string traceparent_of(const trace_context& c);

/// Lowercase hex of an id (tests, logs).
template <size_t N>
std::string hex_of(const std::array<uint8_t, N>& id) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out(2 * N, '0');
  for (size_t i = 0; i < N; ++i) {
    out[2 * i] = digits[id[i] >> 4];
    out[2 * i + 1] = digits[id[i] & 15];
  }
  return out;
}

/// Random ids from a per-thread generator seeded from the OS; never all
/// zero.
trace_id new_trace_id();
span_id new_span_id();

/// The sampling decision for a new trace at `ratio` (0 to 1), from the
/// trace id alone (OpenTelemetry's TraceIdRatioBased: its last 8 bytes,
/// big-endian, below ratio x 2^64), so every process that sees the id
/// decides alike.
bool sampled_at(const trace_id& id, double ratio);

} // namespace outrider::trace
