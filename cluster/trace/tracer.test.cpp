#include "cluster/trace/tracer.hpp"

#include <catch2/catch.hpp>

#include "tests/otlp_receiver.hpp"

using namespace outrider;
using namespace outrider::trace;
using namespace std::chrono_literals;

namespace {

template <class Pred>
bool within(std::chrono::milliseconds limit, Pred p) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (p())
      return true;
    std::this_thread::sleep_for(10ms);
  }
  return p();
}

tracer_settings to(const std::string& url, double ratio = 1.0) {
  tracer_settings s;
  std::string why;
  s.endpoint = parse_otlp_endpoint(url, &why);
  REQUIRE(s.endpoint);
  s.sample_ratio = ratio;
  s.service_name = "outrider-test";
  s.resource = {{"outrider.role", "unit"}};
  s.interval = 50ms;
  return s;
}

double value_of(const std::string& text, const std::string& series) {
  auto at = text.find("\n" + series + " ");
  if (at == std::string::npos)
    return -1;
  return std::stod(text.substr(at + series.size() + 2));
}

} // namespace

TEST_CASE("otlp endpoint: http://host:port[/path] only") {
  std::string why;
  auto e = parse_otlp_endpoint("http://collector:4318", &why);
  REQUIRE(e);
  CHECK(e->host == "collector");
  CHECK(e->port == 4318);
  CHECK(e->target == "/v1/traces");
  auto p = parse_otlp_endpoint("http://[::1]:4318/otlp/v1/traces", &why);
  REQUIRE(p);
  CHECK(p->host == "::1");
  CHECK(p->target == "/otlp/v1/traces");
  for (const char* bad :
       {"https://c:4318", "c:4318", "http://c", "http://c:0", "http://c:99999",
        "http://:4318", "http://c:43x", "http://c:4318/a b"}) {
    INFO(bad);
    CHECK_FALSE(parse_otlp_endpoint(bad, &why));
  }
}

TEST_CASE("spans reach an OTLP receiver parented as started, with their "
          "attributes, events and status") {
  test::otlp_receiver rx;
  runtime::metrics_registry m;
  auto t = tracer::make(to(rx.url()), m);
  auto in = parse_traceparent(
    "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "k=v");
  {
    auto root = t->start_entry("router.request", in, span_kind::server);
    REQUIRE(root.recording());
    root.set("outrider.model", "m").set("outrider.prompt_tokens", int64_t{7});
    auto child =
      t->start_child("router.attempt", root.context(), span_kind::client);
    child.event("first_token");
    child.fail("UNAVAILABLE");
    child.end();
    CHECK(traceparent_of(child.context()).size() == 55);
  }
  REQUIRE(within(5s, [&] { return rx.spans().size() == 2; }));
  auto spans = rx.spans();
  const auto& attempt = spans[0].span; // ended first
  const auto& root = spans[1].span;
  CHECK(spans[0].service == "outrider-test");
  CHECK(root.name() == "router.request");
  CHECK(test::otlp_receiver::hex(root.trace_id()) ==
        "0af7651916cd43dd8448eb211c80319c");
  CHECK(test::otlp_receiver::hex(root.parent_span_id()) == "b7ad6b7169203331");
  CHECK(root.trace_state() == "k=v");
  CHECK(root.kind() == opentelemetry::proto::trace::v1::Span::SPAN_KIND_SERVER);
  CHECK(test::otlp_receiver::attribute(root, "outrider.model") == "m");
  CHECK(test::otlp_receiver::attribute(root, "outrider.prompt_tokens") == "7");
  CHECK(attempt.trace_id() == root.trace_id());
  CHECK(attempt.parent_span_id() == root.span_id());
  CHECK(attempt.events_size() == 1);
  CHECK(attempt.events(0).name() == "first_token");
  CHECK(attempt.status().code() ==
        opentelemetry::proto::trace::v1::Status::STATUS_CODE_ERROR);
  CHECK(root.end_time_unix_nano() >= root.start_time_unix_nano());
  CHECK(root.start_time_unix_nano() > 1'600'000'000'000'000'000ull);
  CHECK(rx.bad_bodies() == 0);
  // Counted once the collector's answer is back (after it took them).
  CHECK(within(5s, [&] { return t->exported() == 2; }));
}

TEST_CASE("a client's unsampled trace and an unsampled ratio record "
          "nothing, and the client's context still passes on") {
  test::otlp_receiver rx;
  runtime::metrics_registry m;
  auto t = tracer::make(to(rx.url(), 0.0), m);
  auto in = parse_traceparent(
    "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00");
  auto s = t->start_entry("router.request", in, span_kind::server);
  CHECK_FALSE(s.recording());
  CHECK(traceparent_of(s.context()) ==
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00");
  CHECK_FALSE(t->start_entry("x", std::nullopt, span_kind::server).recording());
  // No collector: nothing recorded, a sampled client context passes on.
  auto off = tracer::make({}, m);
  auto sampled = parse_traceparent(
    "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
  auto p = off->start_entry("router.request", sampled, span_kind::server);
  CHECK_FALSE(p.recording());
  CHECK(p.context().span == sampled->span);
  s.end();
  t->stop();
  CHECK(rx.requests() == 0);
}

TEST_CASE("a collector that is down costs counted drops, never a wait") {
  auto port = [] {
    test::otlp_receiver rx; // bound, then gone: nothing listens there
    return rx.server.port();
  }();
  runtime::metrics_registry m;
  auto s = to("http://127.0.0.1:" + std::to_string(port));
  s.queue_cap = 64;
  auto t = tracer::make(s, m);
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 1000; ++i)
    t->start_entry("router.request", std::nullopt, span_kind::server).end();
  // Ending a span only queues it, even with the collector gone.
  CHECK(std::chrono::steady_clock::now() - t0 < 2s);
  auto failed = [&] {
    return value_of(m.render(), "outrider_trace_spans_dropped_total{reason="
                                "\"export_failed\"}");
  };
  CHECK(within(10s, [&] { return failed() >= 1; }));
  t->stop();
  CHECK(t->exported() == 0);
  auto text = m.render();
  INFO(text);
  auto full =
    value_of(text, "outrider_trace_spans_dropped_total{reason=\"queue_full\"}");
  auto gone =
    value_of(text, "outrider_trace_spans_dropped_total{reason=\"shutdown\"}");
  // Every span is accounted for: none exported, each drop counted once.
  CHECK(full > 0); // the queue holds 64: most of a burst of 1,000
  CHECK(full + failed() + gone == 1000);
  CHECK(value_of(text, "outrider_trace_export_failures_total") >= 1);
}
