#pragma once

// The HTTP endpoints a gateway reaches a worker's ranks at, and the
// endpoint picker's subset hint over them (docs/wire.md, "The endpoint
// picker"): pure string work, no I/O.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace outrider::router {

/// Rank `rank`'s endpoint from the record's (rank 0's) `host:port`: the
/// port plus the rank, as an InferencePool's targetPorts list a pod's
/// data-parallel ranks. Empty when the record has none or the port would
/// pass 65535.
inline std::string rank_endpoint(const std::string& rank0, uint32_t rank) {
  auto colon = rank0.rfind(':');
  if (rank0.empty() || colon == std::string::npos)
    return {};
  uint64_t port = 0;
  for (auto i = colon + 1; i < rank0.size(); ++i) {
    if (rank0[i] < '0' || rank0[i] > '9' || port > 65535)
      return {};
    port = port * 10 + static_cast<uint64_t>(rank0[i] - '0');
  }
  port += rank;
  if (port == 0 || port > 65535)
    return {};
  return rank0.substr(0, colon + 1) + std::to_string(port);
}

/// Whether `endpoint` (ip:port) is in the subset: listed as itself, or its
/// host listed bare (the hint names pods, a pod may hold several ranks).
/// An endpoint that is empty (the worker advertises none) never is.
inline bool in_subset(const std::vector<std::string>& subset,
                      const std::string& endpoint) {
  if (endpoint.empty())
    return false;
  std::string_view host{endpoint};
  host = host.substr(0, host.rfind(':'));
  for (const auto& s : subset)
    if (s == endpoint || std::string_view{s} == host)
      return true;
  return false;
}

} // namespace outrider::router
