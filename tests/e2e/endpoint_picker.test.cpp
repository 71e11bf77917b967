// The router as an endpoint picker (--epp-port): the test plays an
// inference gateway's Envoy with a client built from the pinned ext_proc
// protos (request headers, body, the response leg with the served
// endpoint, as Envoy's ext_proc filter sends them in buffered body mode),
// sends each request to the engine's OpenAI HTTP the picker named, and
// reads where its prefix was cached.

#include <fstream>

#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "envoy/service/ext_proc/v3/external_processor.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "tests/e2e/router_cluster.hpp"

using namespace outrider::test;
using json = nlohmann::json;
namespace pb = envoy::service::ext_proc::v3;

namespace {

// Engines with OpenAI HTTP on their own ports, sidecars advertising them,
// a router with the endpoint picker (and its HTTP frontend, to compare).
struct epp_cluster {
  temp_dir discovery;
  std::vector<std::unique_ptr<sim_process>> sims;
  std::vector<std::unique_ptr<sidecar_process>> sides;
  std::vector<uint16_t> engine_http;
  uint16_t http_port = free_port();
  uint16_t epp_port = free_port();
  uint16_t status = free_port();
  std::unique_ptr<child_process> router;

  // `roles`: each engine's (prefill, decode; default aggregated); `ranks`:
  // data-parallel ranks per engine (rank r's HTTP on the port + r).
  explicit epp_cluster(int workers, std::vector<std::string> router_flags = {},
                       std::vector<std::string> roles = {}, int ranks = 1) {
    for (int i = 0; i < workers; ++i) {
      engine_http.push_back(free_port_block(ranks));
      sim_process::options so;
      so.ranks = ranks;
      if (static_cast<size_t>(i) < roles.size())
        so.role = roles[static_cast<size_t>(i)];
      so.extra = {"--http-port", std::to_string(engine_http.back())};
      sims.push_back(std::make_unique<sim_process>(so));
      REQUIRE(sims.back()->wait_serving(10s));
      sides.push_back(std::make_unique<sidecar_process>(
        sims.back()->endpoint(), std::make_shared<sidecar_dirs>(),
        std::vector<std::string>{
          "--discovery-dir", discovery.str(), "--worker-id",
          "worker-" + std::to_string(i), "--engine-http-endpoint",
          "127.0.0.1:" + std::to_string(engine_http.back())}));
    }
    for (auto& s : sides)
      REQUIRE(eventually([&] { return s->get("/ready") == 200; }, 10s));
    router_flags.insert(router_flags.begin(),
                        {"--epp-port", std::to_string(epp_port)});
    auto args =
      router_command(discovery.str(), http_port, status, 0, router_flags);
    router = std::make_unique<child_process>(args);
    REQUIRE(eventually([&] { return http_get(status, "/ready") == 200; }, 60s));
    REQUIRE(eventually(
      [&] {
        return metric("outrider_router_workers") >=
               static_cast<double>(workers);
      },
      10s));
  }
  double metric(const std::string& series) const {
    return metric_value(status, series);
  }
  std::string endpoint(size_t i) const {
    return "127.0.0.1:" + std::to_string(engine_http[i]);
  }
  std::shared_ptr<grpc::Channel> channel() const {
    return grpc::CreateChannel("127.0.0.1:" + std::to_string(epp_port),
                               grpc::InsecureChannelCredentials());
  }
};

void add_header(pb::HttpHeaders* h, const std::string& k,
                const std::string& v) {
  auto* hv = h->mutable_headers()->add_headers();
  hv->set_key(k);
  hv->set_raw_value(v);
}

std::string header_value(const pb::HeaderMutation& m, const std::string& k) {
  for (const auto& s : m.set_headers())
    if (s.header().key() == k)
      return s.header().raw_value().empty() ? s.header().value()
                                            : s.header().raw_value();
  return {};
}

// One gateway request's ext_proc stream, as Envoy drives it with
// request_body_mode BUFFERED.
class gateway_call {
 public:
  explicit gateway_call(const epp_cluster& c)
    : stub_(pb::ExternalProcessor::NewStub(c.channel())) {
    ctx_.set_deadline(std::chrono::system_clock::now() + 60s);
    rw_ = stub_->Process(&ctx_);
  }

  struct picked {
    bool immediate = false;
    int status = 0;            // immediate: the HTTP status
    std::string endpoint;      // the header
    std::string meta_endpoint; // envoy.lb dynamic metadata
    std::string prefiller;     // x-prefiller-host-port (P/D)
    std::vector<std::string> removed_on_headers;
    std::map<std::string, std::string> immediate_headers;
  };

  // Headers then the whole body; what the picker answered.
  picked pick(const std::string& body,
              std::vector<std::pair<std::string, std::string>> extra = {},
              std::optional<std::vector<std::string>> subset = {}) {
    picked out;
    pb::ProcessingRequest hreq;
    auto* h = hreq.mutable_request_headers();
    add_header(h, ":method", "POST");
    add_header(h, ":path", "/v1/completions");
    add_header(h, "content-type", "application/json");
    for (const auto& [k, v] : extra)
      add_header(h, k, v);
    if (subset) {
      auto& ns =
        (*hreq.mutable_metadata_context()
            ->mutable_filter_metadata())[std::string{"envoy.lb.subset_hint"}];
      auto* list =
        (*ns.mutable_fields())[std::string{
                                 "x-gateway-destination-endpoint-subset"}]
          .mutable_list_value();
      for (const auto& e : *subset)
        list->add_values()->set_string_value(e);
    }
    REQUIRE(rw_->Write(hreq));
    pb::ProcessingResponse resp;
    REQUIRE(rw_->Read(&resp));
    if (resp.has_immediate_response())
      return immediate(resp, out);
    REQUIRE(resp.has_request_headers());
    for (const auto& r :
         resp.request_headers().response().header_mutation().remove_headers())
      out.removed_on_headers.push_back(r);
    pb::ProcessingRequest breq;
    breq.mutable_request_body()->set_body(body);
    breq.mutable_request_body()->set_end_of_stream(true);
    REQUIRE(rw_->Write(breq));
    REQUIRE(rw_->Read(&resp));
    if (resp.has_immediate_response())
      return immediate(resp, out);
    REQUIRE(resp.has_request_body());
    read_pick(resp.request_body().response(), resp, out);
    return out;
  }

  // Streamed bodies sent without waiting for the headers' answer (Envoy's
  // STREAMED with send_body_without_waiting_for_header_response, as the
  // GIE's streaming gateways send them): headers and the body in two
  // chunks; once the body is whole the picker answers the headers (with the
  // endpoint), then each chunk, in order.
  picked pick_streamed(const std::string& body) {
    picked out;
    pb::ProcessingRequest hreq;
    auto* h = hreq.mutable_request_headers();
    add_header(h, ":method", "POST");
    add_header(h, ":path", "/v1/completions");
    REQUIRE(rw_->Write(hreq));
    auto half = body.size() / 2;
    for (int part = 0; part < 2; ++part) {
      pb::ProcessingRequest b;
      b.mutable_request_body()->set_body(part == 0 ? body.substr(0, half)
                                                   : body.substr(half));
      b.mutable_request_body()->set_end_of_stream(part == 1);
      REQUIRE(rw_->Write(b));
    }
    pb::ProcessingResponse resp;
    REQUIRE(rw_->Read(&resp));
    if (resp.has_immediate_response())
      return immediate(resp, out);
    REQUIRE(resp.has_request_headers());
    read_pick(resp.request_headers().response(), resp, out);
    REQUIRE(rw_->Read(&resp));
    CHECK(resp.has_request_body()); // the first chunk
    CHECK(resp.request_body().response().header_mutation().set_headers_size() ==
          0);
    REQUIRE(rw_->Read(&resp));
    CHECK(resp.has_request_body()); // the last chunk
    return out;
  }

  // The response leg: headers naming the endpoint that served, the body.
  void served(const std::string& endpoint, const std::string& body) {
    pb::ProcessingRequest r;
    add_header(r.mutable_response_headers(), ":status", "200");
    auto& ns = (*r.mutable_metadata_context()
                   ->mutable_filter_metadata())[std::string{"envoy.lb"}];
    (*ns.mutable_fields())[std::string{"x-gateway-destination-endpoint-served"}]
      .set_string_value(endpoint);
    REQUIRE(rw_->Write(r));
    pb::ProcessingResponse resp;
    REQUIRE(rw_->Read(&resp));
    CHECK(resp.has_response_headers());
    pb::ProcessingRequest b;
    b.mutable_response_body()->set_body(body);
    b.mutable_response_body()->set_end_of_stream(true);
    REQUIRE(rw_->Write(b));
    REQUIRE(rw_->Read(&resp));
    CHECK(resp.has_response_body());
  }

  grpc::Status finish() {
    rw_->WritesDone();
    return rw_->Finish();
  }

 private:
  // The endpoint (and prefiller) from the answer that carries them: the
  // header mutation and the dynamic metadata.
  static void read_pick(const pb::CommonResponse& c,
                        const pb::ProcessingResponse& resp, picked& out) {
    out.endpoint =
      header_value(c.header_mutation(), "x-gateway-destination-endpoint");
    out.prefiller = header_value(c.header_mutation(), "x-prefiller-host-port");
    const auto& lb =
      resp.dynamic_metadata().fields().at(std::string{"envoy.lb"});
    out.meta_endpoint = lb.struct_value()
                          .fields()
                          .at(std::string{"x-gateway-destination-endpoint"})
                          .string_value();
  }

  static picked immediate(const pb::ProcessingResponse& resp, picked& out) {
    out.immediate = true;
    out.status = static_cast<int>(resp.immediate_response().status().code());
    for (const auto& s : resp.immediate_response().headers().set_headers())
      out.immediate_headers[s.header().key()] = s.header().raw_value();
    return out;
  }

  std::unique_ptr<pb::ExternalProcessor::Stub> stub_;
  grpc::ClientContext ctx_;
  std::unique_ptr<
    grpc::ClientReaderWriter<pb::ProcessingRequest, pb::ProcessingResponse>>
    rw_;
};

std::string completion(const std::vector<uint32_t>& prompt) {
  return json{{"model", "sim-model"}, {"prompt", prompt}, {"max_tokens", 2}}
    .dump();
}

// Sends the body where the picker said (the engine's OpenAI HTTP); the
// cached prompt tokens it reports.
int run_on(const std::string& endpoint, const std::string& body) {
  auto port =
    static_cast<uint16_t>(std::stoi(endpoint.substr(endpoint.rfind(':') + 1)));
  auto [code, answer] = http(port, "POST", "/v1/completions", body);
  INFO(answer);
  REQUIRE(code == 200);
  return json::parse(answer)["usage"]["prompt_tokens_details"]["cached_tokens"]
    .get<int>();
}

// A prefix-sharing workload: 8 prefixes of 64 tokens, each asked 5 times
// with its own 16-token suffix, interleaved.
std::vector<std::vector<uint32_t>> workload() {
  std::vector<std::vector<uint32_t>> out;
  for (uint32_t round = 0; round < 5; ++round)
    for (uint32_t p = 0; p < 8; ++p)
      out.push_back(concat(tokens(1000 + 1000 * p, 64),
                           tokens(20000 + 100 * (round * 8 + p), 16)));
  return out;
}

} // namespace

TEST_CASE("endpoint picker: a gateway's requests go to the workers holding "
          "their prefixes, as the HTTP frontend places them") {
  double epp_rate = 0, http_rate = 0;
  {
    epp_cluster c{3};
    int cached = 0, total = 0;
    for (const auto& prompt : workload()) {
      gateway_call call{c};
      auto body = completion(prompt);
      auto p = call.pick(body);
      REQUIRE_FALSE(p.immediate);
      CHECK(p.endpoint == p.meta_endpoint);
      CHECK((p.endpoint == c.endpoint(0) || p.endpoint == c.endpoint(1) ||
             p.endpoint == c.endpoint(2)));
      cached += run_on(p.endpoint, body);
      total += static_cast<int>(prompt.size());
      call.served(p.endpoint, "{}");
      CHECK(call.finish().ok());
    }
    epp_rate = 100.0 * cached / total;
    CHECK(c.metric("outrider_epp_requests_total{outcome=\"picked\"}") == 40);
    CHECK(c.metric("outrider_epp_served_elsewhere_total") == 0);
    // Every booking went with its response.
    CHECK(eventually(
      [&] {
        double held = 0;
        for (int w = 0; w < 3; ++w)
          held +=
            c.metric("outrider_router_active_decode_blocks{worker=\"worker-" +
                     std::to_string(w) + "\",rank=\"0\"}");
        return held == 0;
      },
      10s));
  }
  {
    epp_cluster c{3};
    int cached = 0, total = 0;
    for (const auto& prompt : workload()) {
      auto r = complete_on(c.http_port, prompt, 2);
      cached += r["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
      total += static_cast<int>(prompt.size());
    }
    http_rate = 100.0 * cached / total;
  }
  INFO("hit rate: endpoint picker " << epp_rate << "%, HTTP frontend "
                                    << http_rate << "%");
  // 32 of 40 requests can find their 64-token prefix: 64% at best.
  CHECK(epp_rate > 55);
  CHECK(std::abs(epp_rate - http_rate) <= 2.0);
}

TEST_CASE("endpoint picker: the subset hint, 503 with no endpoint, 429 "
          "when shed, spoofed headers stripped, health services") {
  epp_cluster c{2, {"--router-queue-threshold", "1", "--queue-timeout", "1s"}};
  auto body = completion(tokens(500, 40));
  SECTION("the subset hint names the only eligible endpoint") {
    for (size_t w : {size_t{0}, size_t{1}}) {
      gateway_call call{c};
      auto p = call.pick(body, {}, std::vector<std::string>{c.endpoint(w)});
      REQUIRE_FALSE(p.immediate);
      CHECK(p.endpoint == c.endpoint(w));
      call.served(p.endpoint, "{}");
      CHECK(call.finish().ok());
    }
    gateway_call none{c};
    auto p = none.pick(body, {}, std::vector<std::string>{"10.9.9.9:8000"});
    CHECK(p.immediate);
    CHECK(p.status == 503);
    gateway_call empty{c};
    CHECK(empty.pick(body, {}, std::vector<std::string>{}).status == 503);
  }
  SECTION("spoofed reserved headers are removed, the endpoint replaced") {
    gateway_call call{c};
    auto p = call.pick(body, {{"x-gateway-destination-endpoint", "6.6.6.6:1"},
                              {"x-gateway-inference-objective", "critical"}});
    REQUIRE_FALSE(p.immediate);
    for (const char* h :
         {"x-gateway-destination-endpoint", "x-prefiller-host-port",
          "x-gateway-inference-fairness-id", "x-gateway-inference-objective",
          "x-gateway-model-name-rewrite"}) {
      INFO(h);
      CHECK(std::count(p.removed_on_headers.begin(), p.removed_on_headers.end(),
                       h) == 1);
    }
    CHECK((p.endpoint == c.endpoint(0) || p.endpoint == c.endpoint(1)));
  }
  SECTION("bookings are held until the response: the third request waits, "
          "is shed past --queue-timeout, and goes once one is answered") {
    gateway_call a{c}, b{c};
    auto pa = a.pick(body);
    auto pb2 = b.pick(completion(tokens(900, 40)));
    REQUIRE_FALSE(pa.immediate);
    REQUIRE_FALSE(pb2.immediate);
    CHECK(pa.endpoint != pb2.endpoint);
    gateway_call late{c};
    auto t0 = std::chrono::steady_clock::now();
    auto pl = late.pick(completion(tokens(1300, 40)));
    CHECK(pl.immediate);
    CHECK(pl.status == 429);
    CHECK(pl.immediate_headers["x-outrider-dropped-reason"] == "ttl-expired");
    CHECK(pl.immediate_headers["retry-after"] == "1");
    CHECK(std::chrono::steady_clock::now() - t0 >= 900ms);
    a.served(pa.endpoint, "{}");
    gateway_call next{c};
    auto pn = next.pick(completion(tokens(1700, 40)));
    REQUIRE_FALSE(pn.immediate);
    CHECK(pn.endpoint == pa.endpoint);
    CHECK(c.metric("outrider_epp_requests_total{outcome=\"shed\"}") == 1);
  }
  SECTION("health: liveness, readiness, the ExternalProcessor; unknown "
          "names NOT_FOUND") {
    auto stub = grpc::health::v1::Health::NewStub(c.channel());
    for (const std::string s :
         {"liveness", "readiness",
          "envoy.service.ext_proc.v3.ExternalProcessor", "bogus"}) {
      INFO(s);
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + 10s);
      grpc::health::v1::HealthCheckRequest req;
      req.set_service(s);
      grpc::health::v1::HealthCheckResponse resp;
      auto st = stub->Check(&ctx, req, &resp);
      if (s == "bogus") {
        CHECK(st.error_code() == grpc::StatusCode::NOT_FOUND);
      } else {
        REQUIRE(st.ok());
        CHECK(resp.status() == grpc::health::v1::HealthCheckResponse::SERVING);
      }
    }
  }
}

TEST_CASE("endpoint picker: streamed bodies get the endpoint on the "
          "headers' answer once the body is whole, answers in order") {
  epp_cluster c{2, {"--epp-body-mode", "streamed"}};
  auto prefix = tokens(3000, 64);
  int cached = 0;
  for (uint32_t i = 0; i < 4; ++i) {
    gateway_call call{c};
    auto body = completion(concat(prefix, tokens(9000 + 50 * i, 8)));
    auto p = call.pick_streamed(body);
    REQUIRE_FALSE(p.immediate);
    CHECK(p.endpoint == p.meta_endpoint);
    cached += run_on(p.endpoint, body);
    call.served(p.endpoint, "{}");
    CHECK(call.finish().ok());
  }
  CHECK(cached == 3 * 64); // the prefix found where it went first
}

TEST_CASE("endpoint picker: with disaggregation a long new prompt goes to "
          "the decode worker with the prefill worker in "
          "x-prefiller-host-port, a mostly cached one without") {
  epp_cluster c{2,
                {"--router-conditional-disagg",
                 "--router-conditional-disagg-config",
                 R"({"policy":"isl_bounding","eff_isl_threshold":64,)"
                 R"("eff_isl_ratio_threshold":0.7})"},
                {"prefill", "decode"}};
  // A prompt the decode engine holds: mostly cached there, prefilled there.
  auto held = tokens(600, 200);
  warm(*c.sims[1], held);
  REQUIRE(eventually(
    [&] { return c.metric("outrider_router_index_entries") >= 50; }, 10s));
  gateway_call local{c};
  auto q = local.pick(completion(concat(held, tokens(9000, 8))));
  REQUIRE_FALSE(q.immediate);
  CHECK(q.endpoint == c.endpoint(1));
  CHECK(q.prefiller.empty());
  local.served(q.endpoint, "{}");
  CHECK(local.finish().ok());
  // A long new one: prefilled on the prefill worker first.
  gateway_call remote{c};
  auto p = remote.pick(completion(tokens(3000, 200)));
  REQUIRE_FALSE(p.immediate);
  CHECK(p.endpoint == c.endpoint(1));
  CHECK(p.prefiller == c.endpoint(0));
  remote.served(p.endpoint, "{}");
  CHECK(remote.finish().ok());
  CHECK(
    c.metric(
      "outrider_router_disagg_decisions_total{outcome=\"remote_prefill\"}") ==
    1);
  CHECK(
    c.metric(
      "outrider_router_disagg_decisions_total{outcome=\"local_prefill\"}") ==
    1);
}

TEST_CASE("endpoint picker: a data-parallel engine's ranks are its HTTP "
          "ports, the second rank picked while the first is booked") {
  epp_cluster c{1, {}, {}, 2};
  gateway_call a{c}, b{c};
  auto pa = a.pick(completion(tokens(100, 40)));
  auto pb2 = b.pick(completion(tokens(7000, 40)));
  REQUIRE_FALSE(pa.immediate);
  REQUIRE_FALSE(pb2.immediate);
  std::set<std::string> got{pa.endpoint, pb2.endpoint};
  CHECK(got == std::set<std::string>{
                 "127.0.0.1:" + std::to_string(c.engine_http[0]),
                 "127.0.0.1:" + std::to_string(c.engine_http[0] + 1)});
  for (auto* p : {&pa, &pb2})
    run_on(p->endpoint, completion(tokens(100, 40)));
  a.served(pa.endpoint, "{}");
  b.served(pb2.endpoint, "{}");
}

TEST_CASE("endpoint picker: with no worker at all, 503") {
  epp_cluster c{0};
  gateway_call call{c};
  auto p = call.pick(completion(tokens(10, 8)));
  CHECK(p.immediate);
  CHECK(p.status == 503);
}
