#pragma once

// Who a request belongs to, for flow control: its flow (a tenant) and its
// priority band, read from what the client or the gateway sent.

#include <map>
#include <optional>
#include <string>

namespace outrider::router {

/// The Gateway API Inference Extension's reserved request headers (set by
/// an inference gateway's endpoint picker; outrider reads them).
inline constexpr const char* fairness_id_header =
  "x-gateway-inference-fairness-id";
inline constexpr const char* objective_header = "x-gateway-inference-objective";
/// outrider's own: a priority band as an integer, -100..100.
inline constexpr const char* priority_header = "x-outrider-priority";

struct flow_identity {
  std::string flow;
  int band = 0;
  std::string session; // session affinity's key (cut at 256 bytes), or empty
};

/// `--flow-objectives`: a JSON object of objective names to priorities
/// (integers in -100..100); nullopt and `*why` when it is not one.
std::optional<std::map<std::string, int>>
parse_objectives(const std::string& json, std::string* why);

/// A request's flow and band from its (lower-cased) headers. The flow is
/// the API key's (a bearer token, hashed: a tenant cannot leave its flow by
/// naming another), else the fairness id (cut at 64 bytes), else
/// `default`. The band is `x-outrider-priority`, else the priority of the
/// named objective, else 0. Nullopt and `*why` for a priority that is not
/// an integer in -100..100. The session is the `session_header`'s value.
std::optional<flow_identity>
flow_identity_of(const std::map<std::string, std::string>& headers,
                 const std::map<std::string, int>& objectives,
                 const std::string& session_header, std::string* why);

} // namespace outrider::router
