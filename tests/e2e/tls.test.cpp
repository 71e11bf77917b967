// TLS and mutual TLS on outrider's gRPC edges: the sidecar's relay, the
// router's calls to it (Generate and SubscribeKvEvents) and the router's
// OpenEngine frontend. The certificates are made here by openssl, never
// committed: a CA, a certificate it signs for 127.0.0.1 (server and client
// use), and a stranger signed by another CA.

#include <csignal>

#include <grpcpp/grpcpp.h>

#include "openengine.grpc.pb.h"
#include "tests/e2e/router_cluster.hpp"
#include "tests/e2e/test_pki.hpp"

using namespace outrider::test;
namespace oe = openengine::v1;

namespace {

// One OpenEngine Generate on `endpoint` with `creds`; its status.
grpc::Status generate(const std::string& endpoint,
                      const std::shared_ptr<grpc::ChannelCredentials>& creds,
                      size_t* tokens = nullptr) {
  auto stub = oe::Inference::NewStub(grpc::CreateChannel(endpoint, creds));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 10s);
  oe::GenerateRequest req;
  for (uint32_t i = 1; i <= 8; ++i)
    req.mutable_token_ids()->add_ids(i);
  req.mutable_stopping()->set_max_tokens(3);
  auto reader = stub->Generate(&ctx, req);
  oe::GenerateResponse resp;
  size_t n = 0;
  while (reader->Read(&resp))
    if (resp.has_token())
      n += static_cast<size_t>(resp.token().tokens_size());
  if (tokens)
    *tokens = n;
  return reader->Finish();
}

// Through the router: Generate on the TLS relay, the KV stream too (the
// router learns the prefix and counts the hit on the second request).
void uses_relay(cluster& c) {
  auto prompt = tokens(1, 32);
  CHECK(c.complete(prompt, 4)["choices"].size() == 1);
  CHECK(eventually(
    [&] {
      c.complete(prompt, 2);
      return c.router_metric("outrider_router_cached_blocks_total") > 0;
    },
    15s));
}

// POST /v1/completions over HTTPS with curl and `extra` arguments (the CA,
// a client certificate); the status, or 0 when no answer came.
int https_complete(uint16_t port, const pki& certs,
                   std::vector<std::string> extra,
                   const std::string& scheme = "https") {
  std::vector<std::string> args{
    "/usr/bin/curl",
    "-s",
    "-o",
    "/dev/null",
    "-w",
    "%{http_code}",
    "--max-time",
    "20",
    "--cacert",
    certs.path("ca.crt"),
    "-H",
    "Content-Type: application/json",
    "--data-binary",
    R"({"prompt": [1, 2, 3, 4, 5, 6, 7, 8], "max_tokens": 2})"};
  args.insert(args.end(), extra.begin(), extra.end());
  args.push_back(scheme + "://127.0.0.1:" + std::to_string(port) +
                 "/v1/completions");
  child_process curl{args};
  REQUIRE(curl.wait(30s));
  return std::atoi(curl.output().c_str());
}

} // namespace

TEST_CASE("the HTTP frontend over mutual TLS (--http-tls)") {
  pki certs;
  auto flags = certs.flags();
  auto router = flags;
  router.push_back("--http-tls");
  cluster c{1, {}, router, flags};
  auto refused = [&] {
    return c.router_metric(
      R"(outrider_http_refused_total{server="frontend",reason="tls_handshake"})");
  };
  // With the client certificate the CA signed: served.
  CHECK(https_complete(c.http_port, certs,
                       {"--cert", certs.path("tls.crt"), "--key",
                        certs.path("tls.key")}) == 200);
  // Without one, with a stranger's, or in plaintext: no answer, counted.
  CHECK(https_complete(c.http_port, certs, {}) == 0);
  CHECK(https_complete(c.http_port, certs,
                       {"--cert", certs.path("stranger.crt"), "--key",
                        certs.path("stranger.key")}) == 0);
  CHECK(https_complete(c.http_port, certs, {}, "http") == 0);
  CHECK(eventually([&] { return refused() >= 3; }, 10s));
  // The status server stays plaintext (probes).
  CHECK(http_get(c.router_status, "/ready") == 200);
}

TEST_CASE("mutual TLS between the router and its sidecars, and on the "
          "router's gRPC frontend") {
  pki certs;
  auto flags = certs.flags();
  flags.insert(flags.end(), {"--listener-probe-interval", "100ms"});
  cluster c{1, {}, flags, flags};
  uses_relay(c);
  const auto relay = c.sides[0]->relay_endpoint();
  // The relay refuses plaintext and certificates from another CA.
  CHECK_FALSE(generate(relay, grpc::InsecureChannelCredentials()).ok());
  CHECK_FALSE(generate(relay, certs.client("stranger")).ok());
  size_t n = 0;
  CHECK(generate(relay, certs.client("tls"), &n).ok());
  CHECK(n == 3);
  // The router's OpenEngine frontend: the same rules.
  auto front = "127.0.0.1:" + std::to_string(c.grpc_port);
  CHECK_FALSE(generate(front, grpc::InsecureChannelCredentials()).ok());
  CHECK_FALSE(generate(front, certs.client("stranger")).ok());
  n = 0;
  CHECK(generate(front, certs.client("tls"), &n).ok());
  CHECK(n == 3);
  // The listener probes shake hands with no certificate: refused, which
  // still shows a server that accepts; never taken for a dead listener.
  auto& side = *c.sides[0];
  CHECK(eventually(
    [&] {
      return side.metric(R"(outrider_listener_probes_total{listener="relay"})")
                 .value_or(0) >= 10 &&
             c.router_metric(
               R"(outrider_listener_probes_total{listener="grpc"})") >= 10;
    },
    20s));
  CHECK(side.metric(R"(outrider_listener_failures_total{listener="relay"})")
          .value_or(-1) == 0);
  CHECK(c.router_metric(
          R"(outrider_listener_failures_total{listener="grpc"})") == 0);
  CHECK(side.get("/ready") == 200);
}

TEST_CASE("one certificate for a fleet: relays reached at an address no "
          "certificate names, checked against --tls-server-name") {
  pki certs;
  certs.make_leaf("fleet", "ca", "DNS:outrider-worker");
  std::vector<std::string> fleet{"--tls-cert", certs.path("fleet.crt"),
                                 "--tls-key",  certs.path("fleet.key"),
                                 "--tls-ca",   certs.path("ca.crt")};
  auto named = fleet;
  named.insert(named.end(), {"--tls-server-name", "outrider-worker"});
  cluster c{1, {}, named, fleet};
  uses_relay(c);
  // Without the name, the same certificate does not match 127.0.0.1.
  c.router->signal(SIGTERM);
  REQUIRE(c.router->wait(15s));
  auto plain = fleet;
  plain.insert(plain.end(), {"--migration-limit", "0"});
  c.start_router(plain);
  auto [code, body] =
    http(c.http_port, "POST", "/v1/completions",
         nlohmann::json{{"prompt", tokens(1, 8)}, {"max_tokens", 2}}.dump());
  CHECK(code >= 500);
}

TEST_CASE("a router without TLS cannot use a TLS sidecar") {
  pki certs;
  cluster c{1, {}, {"--migration-limit", "0"}, certs.flags()};
  auto [code, body] =
    http(c.http_port, "POST", "/v1/completions",
         nlohmann::json{{"prompt", tokens(1, 8)}, {"max_tokens", 2}}.dump());
  CHECK(code >= 500);
}

TEST_CASE("bad TLS settings stop the process with one clear line") {
  pki certs;
  auto run = [](std::vector<std::string> args) {
    args.insert(args.begin(), {OUTRIDER_BIN, "--role", "router", "--http-port",
                               "0", "--grpc-port", "0", "--system-port", "0"});
    child_process p{args};
    auto code = p.wait(20s);
    REQUIRE(code);
    return std::make_pair(*code, p.output());
  };
  auto [c1, out1] = run({"--tls-cert", certs.path("tls.crt")});
  CHECK(c1 == 2);
  CHECK(out1.find("--tls-cert and --tls-key go together") != std::string::npos);
  auto [c2, out2] = run(
    {"--tls-cert", certs.path("tls.crt"), "--tls-key", certs.path("ext.cnf")});
  CHECK(c2 == 2);
  CHECK(out2.find("is not PEM") != std::string::npos);
  auto [c3, out3] =
    run({"--tls-cert", certs.path("tls.crt"), "--tls-key",
         certs.path("tls.key"), "--tls-ca", certs.path("missing.crt")});
  CHECK(c3 == 2);
  CHECK(out3.find("--tls-ca: cannot read") != std::string::npos);
  // The key's contents never reach the log.
  CHECK(out2.find("BEGIN") == std::string::npos);
  auto [c4, out4] = run({"--http-tls"});
  CHECK(c4 == 2);
  CHECK(out4.find("--http-tls needs --tls-cert and --tls-key") !=
        std::string::npos);
}
