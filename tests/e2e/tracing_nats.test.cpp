// Traces across the NATS event plane: a traced KV batch carries its
// publisher's span in a `traceparent` header, and the router's receipt of
// it hangs under that span, in the same trace (a real nats-server, the
// spans read by an OTLP receiver built from the pinned protos).

#include "tests/e2e/nats_server.hpp"
#include "tests/e2e/router_cluster.hpp"
#include "tests/otlp_receiver.hpp"

using namespace outrider::test;
using span_t = otlp_receiver::span_t;

namespace {

std::vector<std::string> plus(std::vector<std::string> a,
                              const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

} // namespace

TEST_CASE("nats event plane: a traced KV batch's publish on the sidecar and "
          "its receipt on the router are one trace, parent and child") {
  otlp_receiver rx;
  nats_server nats;
  auto fleet = fleet_flags(nats);
  std::vector<std::string> traced{"--otlp-endpoint", rx.url(),
                                  "--trace-sample-ratio", "1"};
  cluster c{1, {}, plus(fleet, traced), plus(fleet, traced)};
  REQUIRE(eventually(
    [&] { return c.router_metric("outrider_router_workers") == 1; }, 15s));
  // The engine stores the prompt's blocks: the sidecar publishes a batch.
  REQUIRE(c.complete(tokens(5000, 40), 2)["choices"].size() == 1);
  std::optional<otlp_receiver::received> publish, receive;
  REQUIRE(eventually(
    [&] {
      auto spans = rx.spans();
      for (const auto& r : spans)
        if (r.span.name() == "router.kv_receive" &&
            otlp_receiver::attribute(r.span, "outrider.kv.outcome") ==
              "applied")
          for (const auto& p : spans)
            if (p.span.name() == "sidecar.kv_publish" &&
                p.span.span_id() == r.span.parent_span_id() &&
                p.span.trace_id() == r.span.trace_id()) {
              publish = p;
              receive = r;
              return true;
            }
      return false;
    },
    15s));
  // The publisher's span: a producer, on the sidecar, naming the subject.
  CHECK(publish->service == "outrider-sidecar");
  CHECK(publish->span.kind() == span_t::SPAN_KIND_PRODUCER);
  CHECK(publish->span.parent_span_id().empty()); // a batch starts its trace
  CHECK(otlp_receiver::attribute(publish->span, "outrider.worker_id") ==
        "worker-0");
  CHECK(otlp_receiver::attribute(publish->span, "messaging.system") == "nats");
  CHECK(otlp_receiver::attribute(publish->span, "messaging.destination.name") ==
        "outrider.kv.worker-0");
  // The receipt: a consumer, on the router, for the same batch.
  CHECK(receive->service == "outrider-router");
  CHECK(receive->span.kind() == span_t::SPAN_KIND_CONSUMER);
  CHECK(otlp_receiver::attribute(receive->span, "outrider.worker_id") ==
        "worker-0");
  CHECK(otlp_receiver::attribute(receive->span, "outrider.kv.position") ==
        otlp_receiver::attribute(publish->span, "outrider.kv.position"));
  CHECK(otlp_receiver::attribute(receive->span, "outrider.kv.events") ==
        otlp_receiver::attribute(publish->span, "outrider.kv.events"));
  CHECK(std::stoi(
          otlp_receiver::attribute(receive->span, "outrider.kv.events")) > 0);
  CHECK(receive->span.start_time_unix_nano() >=
        publish->span.start_time_unix_nano());
}

TEST_CASE("nats event plane: without tracing no batch carries a trace and "
          "nothing is recorded for the plane") {
  otlp_receiver rx;
  nats_server nats;
  auto fleet = fleet_flags(nats);
  // The router exports (sampling 0: no new traces); the sidecar samples
  // nothing either: its batches go untraced.
  std::vector<std::string> exported{"--otlp-endpoint", rx.url()};
  cluster c{1, {}, plus(fleet, exported), plus(fleet, exported)};
  REQUIRE(eventually(
    [&] { return c.router_metric("outrider_router_workers") == 1; }, 15s));
  REQUIRE(c.complete(tokens(6000, 40), 2)["choices"].size() == 1);
  REQUIRE(eventually(
    [&] { return c.router_metric("outrider_router_index_entries") >= 10; },
    10s));
  // The registration span shows the sidecar's exporter works.
  REQUIRE(eventually(
    [&] {
      for (const auto& r : rx.spans())
        if (r.span.name() == "sidecar.register")
          return true;
      return false;
    },
    15s));
  for (const auto& r : rx.spans()) {
    CHECK(r.span.name() != "sidecar.kv_publish");
    CHECK(r.span.name() != "router.kv_receive");
  }
}
