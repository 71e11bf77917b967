// W3C Trace Context Level 1, "traceparent" and "tracestate" (facts in
// docs/wire.md, "Trace context").
#include "cluster/trace/trace_context.hpp"

#include <random>

namespace outrider::trace {

namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  return -1; // uppercase is invalid too
}

template <size_t N>
bool read_hex(std::string_view s, std::array<uint8_t, N>& out) {
  if (s.size() != 2 * N)
    return false;
  for (size_t i = 0; i < N; ++i) {
    int hi = hex_digit(s[2 * i]), lo = hex_digit(s[2 * i + 1]);
    if (hi < 0 || lo < 0)
      return false;
    out[i] = static_cast<uint8_t>(hi * 16 + lo);
  }
  return true;
}

template <size_t N>
bool all_zero(const std::array<uint8_t, N>& id) {
  for (auto b : id)
    if (b != 0)
      return false;
  return true;
}

bool usable_state(std::string_view s) {
  if (s.size() > 512)
    return false;
  size_t members = 1;
  for (char c : s) {
    if (c < 0x20 || c > 0x7e)
      return false;
    members += c == ',';
  }
  return members <= 32;
}

std::mt19937_64& rng() {
  thread_local std::mt19937_64 gen{[] {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }()};
  return gen;
}

template <size_t N>
void fill_random(std::array<uint8_t, N>& id) {
  do {
    for (size_t i = 0; i < N; i += 8) {
      uint64_t r = rng()();
      for (size_t j = 0; j < 8 && i + j < N; ++j)
        id[i + j] = static_cast<uint8_t>(r >> (8 * j));
    }
  } while (all_zero(id));
}

} // namespace

bool trace_context::valid() const {
  return !all_zero(trace) && !all_zero(span);
}

std::optional<trace_context> parse_traceparent(std::string_view tp,
                                               std::string_view tracestate) {
  // version "-" trace-id "-" parent-id "-" trace-flags: 2+1+32+1+16+1+2.
  constexpr size_t v00_size = 55;
  if (tp.size() < v00_size)
    return std::nullopt;
  std::array<uint8_t, 1> version{}, flags{};
  if (!read_hex(tp.substr(0, 2), version) || version[0] == 0xff)
    return std::nullopt;
  if (version[0] == 0 && tp.size() != v00_size)
    return std::nullopt;
  if (tp.size() > v00_size && tp[v00_size] != '-')
    return std::nullopt;
  if (tp[2] != '-' || tp[35] != '-' || tp[52] != '-')
    return std::nullopt;
  trace_context c;
  if (!read_hex(tp.substr(3, 32), c.trace) ||
      !read_hex(tp.substr(36, 16), c.span) ||
      !read_hex(tp.substr(53, 2), flags) || !c.valid())
    return std::nullopt;
  c.flags = flags[0];
  if (usable_state(tracestate))
    c.state = std::string(tracestate);
  return c;
}

std::string traceparent_of(const trace_context& c) {
  std::array<uint8_t, 1> flags{c.flags};
  return "00-" + hex_of(c.trace) + "-" + hex_of(c.span) + "-" + hex_of(flags);
}

trace_id new_trace_id() {
  trace_id id{};
  fill_random(id);
  return id;
}

span_id new_span_id() {
  span_id id{};
  fill_random(id);
  return id;
}

bool sampled_at(const trace_id& id, double ratio) {
  if (ratio >= 1.0)
    return true;
  if (ratio <= 0.0)
    return false;
  uint64_t low = 0;
  for (size_t i = 8; i < 16; ++i)
    low = (low << 8) | id[i];
  // ratio x 2^64 as a double is exact enough for a sampling threshold.
  return static_cast<double>(low) < ratio * 18446744073709551616.0;
}

} // namespace outrider::trace
