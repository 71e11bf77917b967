// Any bytes as an engine's metrics exposition (re-exported by a sidecar)
// and as a W3C traceparent (from a client): the re-export is in the text
// format (re-exporting it again keeps every sample and drops nothing),
// bounded, and labelled with the worker; a traceparent that parses comes
// back the same when written and read again.
#include <cstddef>
#include <cstdint>
#include <string>

#include "cluster/engine/engine_metrics.hpp"
#include "cluster/trace/trace_context.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text{reinterpret_cast<const char*>(data), size};
  const std::vector<std::pair<std::string, std::string>> worker{
    {"outrider_worker", "w"}};
  outrider::engine::reexport_limits lim;
  lim.max_series = 200;
  lim.max_families = 20;
  auto r = outrider::engine::reexport(text, worker, lim);
  if (r.kept > lim.max_series)
    __builtin_trap();
  auto again = outrider::engine::reexport(r.text, worker, lim);
  if (again.kept != r.kept || again.malformed != 0 || again.over_limit != 0 ||
      again.text != r.text)
    __builtin_trap();
  auto tp = outrider::trace::parse_traceparent(
    text.substr(0, 80),
    text.size() > 80 ? text.substr(80) : std::string_view{});
  if (tp) {
    if (!tp->valid())
      __builtin_trap();
    auto back =
      outrider::trace::parse_traceparent(outrider::trace::traceparent_of(*tp));
    if (!back || back->trace != tp->trace || back->span != tp->span ||
        back->flags != tp->flags)
      __builtin_trap();
  }
  return 0;
}
