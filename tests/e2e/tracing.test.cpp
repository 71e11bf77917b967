// Traces across the cluster: a request's spans from the router's frontend,
// placement and engine calls, the sidecar's relay, exported with OTLP over
// HTTP to a receiver built from the pinned OTLP protos
// (tests/otlp_receiver.hpp); the engine gets the trace in its metadata
// (the simulator keeps the `traceparent` of its last calls).

#include <csignal>
#include <map>
#include <thread>

#include "openengine.grpc.pb.h"
#include "tests/e2e/disagg_cluster.hpp"
#include "tests/e2e/router_cluster.hpp"
#include "tests/otlp_receiver.hpp"

using namespace outrider::test;
using json = nlohmann::json;

namespace {

const std::string trace_hex = "4bf92f3577b34da6a3ce929d0e0e4736";
const std::string client_span = "00f067aa0ba902b7";
const std::string client_parent = "00-" + trace_hex + "-" + client_span + "-01";

// A completion with the client's trace context; status and body.
std::pair<int, std::string> traced(uint16_t port, const json& body,
                                   const std::string& traceparent) {
  std::vector<std::string> args{"/usr/bin/curl",
                                "-s",
                                "-o",
                                "-",
                                "-w",
                                "\n%{http_code}",
                                "-H",
                                "Content-Type: application/json",
                                "-H",
                                "traceparent: " + traceparent,
                                "-H",
                                "tracestate: vendor=1",
                                "--data-binary",
                                body.dump(),
                                "http://127.0.0.1:" + std::to_string(port) +
                                  "/v1/completions"};
  child_process curl{args};
  REQUIRE(curl.wait(60s) == 0);
  auto out = curl.output();
  auto nl = out.rfind('\n');
  return {std::atoi(out.c_str() + nl + 1), out.substr(0, nl)};
}

using span_t = otlp_receiver::span_t;

// The spans of one trace, by name (several of a name in start order).
std::multimap<std::string, otlp_receiver::received>
of_trace(const otlp_receiver& rx, const std::string& trace) {
  std::multimap<std::string, otlp_receiver::received> out;
  for (auto& r : rx.spans())
    if (otlp_receiver::hex(r.span.trace_id()) == trace)
      out.emplace(r.span.name(), r);
  return out;
}

bool has_event(const span_t& s, const std::string& name) {
  for (const auto& e : s.events())
    if (e.name() == name)
      return true;
  return false;
}

std::vector<std::string> engine_traces(const sim_process& sim) {
  std::string body;
  if (http_get(sim.debug, "/debug/traces", &body) != 200)
    return {};
  return json::parse(body).get<std::vector<std::string>>();
}

} // namespace

TEST_CASE("a request yields one trace through router, relay and engine, "
          "parented as it ran, the engine holding its trace id") {
  otlp_receiver rx;
  cluster c{
    1, {}, {"--otlp-endpoint", rx.url()}, {"--otlp-endpoint", rx.url()}};
  auto prompt = tokens(500, 24);
  auto [code, body] = traced(
    c.http_port, json{{"prompt", prompt}, {"max_tokens", 5}}, client_parent);
  REQUIRE(code == 200);
  // The router's four spans and the relay's, all in the client's trace.
  std::multimap<std::string, otlp_receiver::received> spans;
  REQUIRE(eventually(
    [&] {
      spans = of_trace(rx, trace_hex);
      return spans.count("router.request") == 1 &&
             spans.count("router.placement") == 1 &&
             spans.count("router.attempt") == 1 &&
             spans.count("relay.generate") == 1;
    },
    15s));
  const auto& request = spans.find("router.request")->second;
  const auto& placement = spans.find("router.placement")->second.span;
  const auto& attempt = spans.find("router.attempt")->second.span;
  const auto& relay = spans.find("relay.generate")->second;
  CHECK(request.service == "outrider-router");
  CHECK(relay.service == "outrider-sidecar");
  CHECK(otlp_receiver::hex(request.span.parent_span_id()) == client_span);
  CHECK(request.span.trace_state() == "vendor=1");
  CHECK(placement.parent_span_id() == request.span.span_id());
  CHECK(attempt.parent_span_id() == request.span.span_id());
  CHECK(relay.span.parent_span_id() == attempt.span_id());
  CHECK(has_event(request.span, "first_token"));
  CHECK(has_event(request.span, "last_token"));
  CHECK(has_event(attempt, "first_token"));
  CHECK(has_event(relay.span, "first_token"));
  CHECK(otlp_receiver::attribute(placement, "outrider.worker_id") ==
        "worker-0");
  CHECK(otlp_receiver::attribute(request.span, "gen_ai.usage.output_tokens") ==
        "5");
  CHECK(otlp_receiver::attribute(relay.span, "outrider.output_tokens") == "5");
  // Nested in time as in calls.
  CHECK(request.span.start_time_unix_nano() <= attempt.start_time_unix_nano());
  CHECK(attempt.end_time_unix_nano() <= request.span.end_time_unix_nano());
  // The engine got the trace, under the relay's span.
  auto expected =
    "00-" + trace_hex + "-" + otlp_receiver::hex(relay.span.span_id()) + "-01";
  auto seen = engine_traces(*c.sims[0]);
  INFO(json(seen).dump());
  CHECK(std::find(seen.begin(), seen.end(), expected) != seen.end());
  // The sidecar's own events are spans too: its registration.
  CHECK(eventually(
    [&] {
      for (const auto& r : rx.spans())
        if (r.span.name() == "sidecar.register" &&
            otlp_receiver::attribute(r.span, "outrider.written") == "true" &&
            otlp_receiver::attribute(r.span, "outrider.worker_id") ==
              "worker-0")
          return true;
      return false;
    },
    10s));
  // The gRPC frontend reads the context from the call's metadata.
  const std::string grpc_trace = "0123456789abcdef0123456789abcdef";
  auto stub = openengine::v1::Inference::NewStub(
    grpc::CreateChannel("127.0.0.1:" + std::to_string(c.grpc_port),
                        grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 20s);
  ctx.AddMetadata("traceparent",
                  "00-" + grpc_trace + "-" + client_span + "-01");
  openengine::v1::GenerateRequest req;
  req.mutable_token_ids()->mutable_ids()->Add(prompt.begin(), prompt.end());
  req.mutable_stopping()->set_max_tokens(3);
  auto reader = stub->Generate(&ctx, req);
  openengine::v1::GenerateResponse resp;
  while (reader->Read(&resp)) {
  }
  REQUIRE(reader->Finish().ok());
  REQUIRE(eventually(
    [&] {
      auto g = of_trace(rx, grpc_trace);
      return g.count("router.request") == 1 && g.count("relay.generate") == 1;
    },
    15s));
  auto g = of_trace(rx, grpc_trace);
  const auto& grpc_request = g.find("router.request")->second.span;
  CHECK(otlp_receiver::attribute(grpc_request, "outrider.api") == "grpc");
  CHECK(otlp_receiver::hex(grpc_request.parent_span_id()) == client_span);
  CHECK(rx.bad_bodies() == 0);
}

TEST_CASE("a remotely prefilled request's trace holds both legs, each "
          "worker's relay under its own leg") {
  otlp_receiver rx;
  disagg_cluster c{R"({"policy":"isl_bounding","eff_isl_threshold":64,)"
                   R"("eff_isl_ratio_threshold":0.7})",
                   "100",
                   {},
                   {"--otlp-endpoint", rx.url()},
                   {"--otlp-endpoint", rx.url()}};
  auto prompt = tokens(600, 200); // 50 blocks, nothing cached: remote
  auto [code, body] = traced(
    c.http_port, json{{"prompt", prompt}, {"max_tokens", 4}}, client_parent);
  REQUIRE(code == 200);
  CHECK(c.metric(decisions + "{outcome=\"remote_prefill\"}") == 1);
  std::multimap<std::string, otlp_receiver::received> spans;
  REQUIRE(eventually(
    [&] {
      spans = of_trace(rx, trace_hex);
      return spans.count("router.request") == 1 &&
             spans.count("router.prefill") == 1 &&
             spans.count("router.attempt") == 1 &&
             spans.count("relay.generate") == 2;
    },
    15s));
  const auto& request = spans.find("router.request")->second.span;
  const auto& prefill = spans.find("router.prefill")->second.span;
  const auto& attempt = spans.find("router.attempt")->second.span;
  CHECK(prefill.parent_span_id() == request.span_id());
  CHECK(otlp_receiver::attribute(prefill, "outrider.worker_id") == "p0");
  CHECK(otlp_receiver::attribute(attempt, "outrider.worker_id") == "d0");
  int under_prefill = 0, under_attempt = 0;
  for (auto [it, end] = spans.equal_range("relay.generate"); it != end; ++it) {
    under_prefill += it->second.span.parent_span_id() == prefill.span_id();
    under_attempt += it->second.span.parent_span_id() == attempt.span_id();
  }
  CHECK(under_prefill == 1);
  CHECK(under_attempt == 1);
  // Both engines got the trace.
  for (const auto* sim : {&c.prefill, &c.decode}) {
    auto seen = engine_traces(*sim);
    INFO(json(seen).dump());
    CHECK(std::any_of(seen.begin(), seen.end(), [](const std::string& tp) {
      return tp.find(trace_hex) != std::string::npos;
    }));
  }
}

TEST_CASE("sampling: a ratio of 1 starts traces for untraced requests, a "
          "client's unsampled trace is passed on and not recorded") {
  otlp_receiver rx;
  cluster c{1,
            {},
            {"--otlp-endpoint", rx.url(), "--trace-sample-ratio", "1"},
            {"--otlp-endpoint", rx.url()}};
  auto unsampled = "00-" + trace_hex + "-" + client_span + "-00";
  REQUIRE(traced(c.http_port,
                 json{{"prompt", tokens(700, 8)}, {"max_tokens", 2}}, unsampled)
            .first == 200);
  auto reply = c.complete(tokens(900, 8), 2); // no traceparent
  CHECK(reply["choices"].size() == 1);
  // The untraced one: a root span of a new trace, down to the engine.
  std::string root_trace;
  REQUIRE(eventually(
    [&] {
      for (const auto& r : rx.spans())
        if (r.span.name() == "router.request" &&
            r.span.parent_span_id().empty())
          root_trace = otlp_receiver::hex(r.span.trace_id());
      return !root_trace.empty() &&
             of_trace(rx, root_trace).count("relay.generate") == 1;
    },
    15s));
  auto seen = engine_traces(*c.sims[0]);
  INFO(json(seen).dump());
  bool engine_has_root = false, engine_has_unsampled = false;
  for (const auto& tp : seen) {
    engine_has_root |= tp.find(root_trace) != std::string::npos;
    // Passed on as the client sent it: nobody recorded a span under it.
    engine_has_unsampled |= tp == unsampled;
  }
  CHECK(engine_has_root);
  CHECK(engine_has_unsampled);
  CHECK(of_trace(rx, trace_hex).empty());
}

TEST_CASE("a migrated stream's second attempt is in the same trace") {
  otlp_receiver rx;
  cluster c{2,
            {.extra = {"--speedup", "2"}},
            {"--migration-limit", "1", "--otlp-endpoint", rx.url()},
            {"--otlp-endpoint", rx.url()}};
  auto prefix = tokens(3000, 32);
  mid_stream_kill kill{c, prefix}; // worker 0 serves it, then dies
  auto prompt = concat(prefix, tokens(100, 3));
  auto [code, body] =
    traced(c.http_port,
           json{{"prompt", prompt}, {"max_tokens", 300}, {"stream", true}},
           client_parent);
  REQUIRE(kill.join());
  CHECK(code == 200);
  CHECK(c.router_metric("outrider_router_migrations_total") == 1);
  std::multimap<std::string, otlp_receiver::received> spans;
  REQUIRE(eventually(
    [&] {
      spans = of_trace(rx, trace_hex);
      return spans.count("router.request") == 1 &&
             spans.count("router.attempt") == 2;
    },
    15s));
  const auto& request = spans.find("router.request")->second.span;
  std::map<std::string, span_t> attempts;
  for (auto [it, end] = spans.equal_range("router.attempt"); it != end; ++it)
    attempts[otlp_receiver::attribute(it->second.span, "outrider.attempt")] =
      it->second.span;
  REQUIRE(attempts.size() == 2);
  CHECK(attempts["0"].parent_span_id() == request.span_id());
  CHECK(attempts["1"].parent_span_id() == request.span_id());
  CHECK(otlp_receiver::attribute(attempts["0"], "outrider.worker_id") ==
        "worker-0");
  CHECK(otlp_receiver::attribute(attempts["1"], "outrider.worker_id") ==
        "worker-1");
  CHECK(attempts["0"].status().code() ==
        opentelemetry::proto::trace::v1::Status::STATUS_CODE_ERROR);
  CHECK(otlp_receiver::attribute(request, "outrider.migrations") == "1");
  CHECK(spans.count("router.placement") == 2);
}

TEST_CASE("with the collector down requests are unaffected and the "
          "dropped spans are counted") {
  auto port = [] {
    otlp_receiver gone; // bound, then closed: nothing listens there
    return gone.server.port();
  }();
  auto url = "http://127.0.0.1:" + std::to_string(port);
  cluster c{1,
            {},
            {"--otlp-endpoint", url, "--trace-sample-ratio", "1"},
            {"--otlp-endpoint", url}};
  for (uint32_t i = 0; i < 5; ++i) {
    auto prompt = tokens(100 + 50 * i, 12);
    auto r = c.complete(prompt, 3);
    REQUIRE(r["choices"].size() == 1);
  }
  CHECK(eventually(
    [&] {
      return c.router_metric(
               R"(outrider_trace_spans_dropped_total{reason="export_failed"})") >=
             15;
    },
    15s));
  CHECK(c.router_metric("outrider_trace_export_failures_total") >= 1);
  CHECK(c.router_metric("outrider_trace_spans_exported_total") == 0);
}

TEST_CASE("a malformed --otlp-endpoint or sample ratio is refused at start") {
  for (std::vector<std::string> bad :
       {std::vector<std::string>{"--otlp-endpoint", "https://c:4318"},
        {"--otlp-endpoint", "collector"},
        {"--trace-sample-ratio", "1.5"}}) {
    for (const char* role : {"router", "sidecar"}) {
      std::vector<std::string> args{outrider_bin(), "--role", role};
      args.insert(args.end(), bad.begin(), bad.end());
      child_process p{args};
      INFO(role << " " << bad[0] << " " << bad[1] << ": " << p.output());
      CHECK(p.wait(20s) == 2);
    }
  }
}
