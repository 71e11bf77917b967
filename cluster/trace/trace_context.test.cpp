#include "cluster/trace/trace_context.hpp"

#include <catch2/catch.hpp>

using namespace outrider::trace;

TEST_CASE("traceparent: version 00 is read as the W3C specification asks") {
  auto c = parse_traceparent(
    "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "congo=t61rcW");
  REQUIRE(c);
  CHECK(hex_of(c->trace) == "0af7651916cd43dd8448eb211c80319c");
  CHECK(hex_of(c->span) == "b7ad6b7169203331");
  CHECK(c->sampled());
  CHECK(c->state == "congo=t61rcW");
  CHECK(traceparent_of(*c) ==
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
  auto unsampled = parse_traceparent(
    "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00");
  REQUIRE(unsampled);
  CHECK_FALSE(unsampled->sampled());
}

TEST_CASE("traceparent: every malformed shape is no context") {
  const char* bad[] = {
    "",
    "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",      // no flags
    "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",   // uppercase
    "00-00000000000000000000000000000000-b7ad6b7169203331-01",   // zero trace
    "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",   // zero span
    "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",   // version ff
    "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-x", // 00 + more
    "00_0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",   // separator
    "00-0af7651916cd43dd8448eb211c80319g-b7ad6b7169203331-01",   // not hex
    "0-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-",
  };
  for (const char* s : bad) {
    INFO(s);
    CHECK_FALSE(parse_traceparent(s));
  }
}

TEST_CASE("traceparent: a later version's extra fields are skipped") {
  CHECK(parse_traceparent(
    "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-what-else"));
  CHECK(parse_traceparent(
    "cc-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"));
  CHECK_FALSE(parse_traceparent(
    "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01x"));
}

TEST_CASE("tracestate: too long, too many members or binary is dropped") {
  const char* tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
  CHECK(parse_traceparent(tp, std::string(513, 'a'))->state.empty());
  std::string many;
  for (int i = 0; i < 33; ++i)
    many += (i ? "," : "") + std::string("k") + std::to_string(i) + "=v";
  CHECK(parse_traceparent(tp, many)->state.empty());
  CHECK(parse_traceparent(tp, std::string("a=\x01"))->state.empty());
  CHECK(parse_traceparent(tp, "a=1,b=2")->state == "a=1,b=2");
}

TEST_CASE("new ids are never zero and differ, and sampling follows the id") {
  auto a = new_trace_id(), b = new_trace_id();
  CHECK(a != b);
  CHECK(a != trace_id{});
  CHECK(new_span_id() != span_id{});
  int sampled = 0;
  for (int i = 0; i < 4000; ++i)
    sampled += sampled_at(new_trace_id(), 0.25);
  CHECK(sampled > 800);
  CHECK(sampled < 1200);
  auto id = new_trace_id();
  CHECK(sampled_at(id, 1.0));
  CHECK_FALSE(sampled_at(id, 0.0));
  CHECK(sampled_at(id, 0.5) == sampled_at(id, 0.5));
}
