#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "cluster/engine/dialect.hpp"
#include "openengine.pb.h"

namespace outrider::engine {

struct stream_outcome {
  grpc::Status status;
  bool cancelled = false; // `deliver` returned false
  uint32_t tokens = 0;
};

/// Streams an OpenEngine request from an engine speaking `d` on `ch`:
/// passed through to OpenEngine engines (and `unknown`), translated for vLLM
/// engines (their
/// responses become OpenEngine `prompt`, `token` and `finished` events;
/// `openengine-target-dp-rank` becomes `x-data-parallel-rank`). `deliver`
/// gets each response and the number of new tokens in it; returning false
/// cancels the engine call. `metadata` holds the `openengine-*` pairs.
/// Used by the sidecar relay and by the router's direct dispatch.
stream_outcome stream_generate(
  grpc::Channel& ch, dialect d, const openengine::v1::GenerateRequest& req,
  const std::vector<std::pair<std::string, std::string>>& metadata,
  grpc::ClientContext& ctx,
  const std::function<bool(const openengine::v1::GenerateResponse&, uint32_t)>&
    deliver);

} // namespace outrider::engine
