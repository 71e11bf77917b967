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

TEST_CASE("a call's rank and priority are read as numbers, garbage refused") {
  using outrider::engine::call_target_from;
  std::string why;
  auto t = call_target_from({{"openengine-target-dp-rank", "3"},
                             {"openengine-priority", "-1"},
                             {"openengine-routing-key", "abc"},
                             {"user-agent", "x"}},
                            &why);
  REQUIRE(t);
  CHECK(t->dp_rank == 3u);
  CHECK(t->priority == -1);
  REQUIRE(t->passthrough.size() == 1); // other openengine-* keys only
  CHECK(t->passthrough[0].first == "openengine-routing-key");
  auto none = call_target_from({}, &why);
  REQUIRE(none);
  CHECK_FALSE(none->dp_rank);
  CHECK_FALSE(none->priority);
  // What atoi used to read as rank 0 or as a prefix.
  for (const char* bad : {"", "abc", "1x", "-1", " 2", "4294967296"}) {
    CHECK_FALSE(call_target_from({{"openengine-target-dp-rank", bad}}, &why));
    CHECK(why.find("uint32") != std::string::npos);
  }
  CHECK_FALSE(call_target_from({{"openengine-priority", "2147483648"}}, &why));
  CHECK_FALSE(call_target_from(
    {{"openengine-target-dp-rank", "1"}, {"openengine-target-dp-rank", "2"}},
    &why));
  CHECK(why.find("more than once") != std::string::npos);
  // The routers a call passed: a number, once.
  auto hopped = call_target_from({{"x-outrider-hops", "2"}}, &why);
  REQUIRE(hopped);
  CHECK(hopped->hops == 2u);
  CHECK(none->hops == 0u);
  CHECK_FALSE(call_target_from({{"x-outrider-hops", "x"}}, &why));
  CHECK_FALSE(call_target_from(
    {{"x-outrider-hops", "1"}, {"x-outrider-hops", "1"}}, &why));
}

TEST_CASE("a call's trace context is taken as it came, never refused") {
  using outrider::engine::call_target_from;
  std::string why;
  const std::string tp =
    "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
  auto t = call_target_from(
    {{"traceparent", tp}, {"tracestate", "a=1"}, {"traceparent", "junk"}},
    &why);
  REQUIRE(t);
  CHECK(t->traceparent == tp); // the first counts
  CHECK(t->tracestate == "a=1");
  auto junk = call_target_from({{"traceparent", "junk"}}, &why);
  REQUIRE(junk); // a malformed context is no context, not a refusal
  CHECK(junk->traceparent == "junk");
  auto huge = call_target_from({{"traceparent", std::string(600, 'a')}}, &why);
  REQUIRE(huge);
  CHECK(huge->traceparent.empty());
}
