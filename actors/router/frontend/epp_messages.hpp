#pragma once

// The endpoint picker protocol's messages (GIE v1.0.0 over Envoy's
// ext_proc; docs/wire.md, "The endpoint picker"): what a gateway's request
// says, and the answers. Pure: no I/O, no state.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "envoy/service/ext_proc/v3/external_processor.pb.h"
#include "runtime/http/types.hpp"

namespace outrider::router::epp {

namespace pb = envoy::service::ext_proc::v3;

/// The header and dynamic-metadata key naming the picked endpoint(s).
inline constexpr const char* destination_key = "x-gateway-destination-endpoint";
/// The namespace of the picked endpoint and of the served one.
inline constexpr const char* lb_namespace = "envoy.lb";
/// The endpoint the data plane used, on the response leg.
inline constexpr const char* served_key =
  "x-gateway-destination-endpoint-served";
/// llm-d's P/D: the prefill worker the decode pod's sidecar prefills on.
inline constexpr const char* prefiller_key = "x-prefiller-host-port";
/// The subset hint: its namespace and key in the request's metadata.
inline constexpr const char* subset_namespace = "envoy.lb.subset_hint";
inline constexpr const char* subset_key =
  "x-gateway-destination-endpoint-subset";

/// Headers a client may not set (the picker's own, and the GIE's reserved
/// request headers): removed from what the gateway forwards.
const std::vector<std::string>& reserved_headers();

/// The request's headers by lower-cased name (Envoy sends them lower-case;
/// the value from `raw_value`, else `value`); a repeated header's values
/// joined with ", ". Pseudo-headers (`:path`) are kept.
std::map<std::string, std::string>
headers_of(const envoy::config::core::v3::HeaderMap& m);

/// The subset hint from the request's metadata: a list of `ip:port` (or a
/// comma-separated string, as some gateways write it; entries trimmed);
/// nullopt when the key is absent (every endpoint qualifies). A present
/// hint may be empty (none does).
std::optional<std::vector<std::string>>
subset_of(const envoy::config::core::v3::Metadata& m);

/// The endpoint the data plane says it used (empty: not said).
std::string served_of(const envoy::config::core::v3::Metadata& m);

/// The mutation that sends the request to `endpoint` (and, with P/D, has it
/// prefilled on `prefiller`): those headers set (replacing any), the other
/// reserved headers removed, the route cache cleared.
pb::CommonResponse picked(const std::string& endpoint,
                          const std::string& prefiller = {});
/// The same endpoint as dynamic metadata: {"envoy.lb": {key: endpoint}}.
google::protobuf::Struct picked_metadata(const std::string& endpoint);

/// A local reply instead of the request: the status, headers and body of
/// `r` (the HTTP frontend's answer for the same case).
pb::ProcessingResponse immediate(const runtime::http_response& r,
                                 const std::string& details);

} // namespace outrider::router::epp
