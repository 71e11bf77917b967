#pragma once

// What the gRPC frontend reads from a call and answers: a request's checks
// and an outcome's status.

#include <string>
#include <vector>

#include <grpcpp/support/status.h>

#include "actors/router/core/migration.hpp"
#include "openengine.pb.h"

namespace outrider::router {

/// An outcome as a gRPC status: an overloaded engine stays
/// RESOURCE_EXHAUSTED for the client (it was UNAVAILABLE, read from the
/// HTTP 503 it shared with "no worker"), so a client can tell "back off"
/// from "try elsewhere".
grpc::StatusCode code_for(outcome_kind k);

/// The request's checks; OK when it may be dispatched. `models`: the names
/// served (empty: any).
grpc::Status check_generate(const openengine::v1::GenerateRequest& in,
                            const std::vector<std::string>& models);

} // namespace outrider::router
