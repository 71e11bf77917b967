#include "cluster/engine/engine_call.hpp"

#include <catch2/catch.hpp>

using grpc::Status;
using grpc::StatusCode;
using outrider::engine::transport_broke;

TEST_CASE("a broken connection is told apart from a refused request") {
  CHECK(transport_broke({StatusCode::UNAVAILABLE, "failed to connect"}));
  // What gRPC 1.51 reports when the peer died mid-stream.
  CHECK(
    transport_broke({StatusCode::UNKNOWN, "recvmsg:Connection reset by peer"}));
  CHECK(transport_broke({StatusCode::INTERNAL, "sendmsg: Broken pipe"}));
  CHECK(transport_broke({StatusCode::UNKNOWN, "Stream removed"}));
  // The engine's own verdicts are not.
  CHECK_FALSE(transport_broke({StatusCode::UNKNOWN, "model raised"}));
  CHECK_FALSE(transport_broke({StatusCode::INTERNAL, "out of memory"}));
  CHECK_FALSE(transport_broke(
    {StatusCode::INVALID_ARGUMENT, "Connection reset by peer"}));
  CHECK_FALSE(transport_broke({StatusCode::RESOURCE_EXHAUSTED, "full"}));
  CHECK_FALSE(transport_broke(Status::OK));
}
