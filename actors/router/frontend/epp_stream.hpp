#pragma once

// One gateway request's ext_proc stream (internal to frontend/epp_*).

#include <map>
#include <memory>
#include <optional>
#include <string>

#include <grpcpp/grpcpp.h>

#include "actors/router/frontend/epp_state.hpp"
#include "envoy/service/ext_proc/v3/external_processor.grpc.pb.h"

namespace outrider::router {

/// A new stream's reactor; it deletes itself when gRPC is done with it.
grpc::ServerBidiReactor<envoy::service::ext_proc::v3::ProcessingRequest,
                        envoy::service::ext_proc::v3::ProcessingResponse>*
new_epp_stream(std::shared_ptr<epp_server::state> st);

/// The gateway's request as a placement: its prompt (token ids, or text
/// and chat through the tokenizer), adapter, salt, flow, band and session.
/// A request that is not a completion (another path, no body) is placed
/// by load alone. The error response when it cannot be read.
std::optional<runtime::http_response>
epp_route_request(epp_server::state& st,
                  const std::map<std::string, std::string>& headers,
                  const std::string& body, route_request& req);

} // namespace outrider::router
