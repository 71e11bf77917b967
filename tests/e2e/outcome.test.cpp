// End-to-end: how a request ended reaches each client in its own terms
// (outcome_kind): an overloaded engine is RESOURCE_EXHAUSTED to a gRPC
// client (it was UNAVAILABLE, read back from the HTTP 503 it shared with
// "no worker") and 503 to an HTTP one. A simulated engine whose waiting
// queue is full (--max-waiting-requests), its sidecar and the router are
// real processes on loopback.
#include <thread>

#include <catch2/catch.hpp>

#include "openengine.grpc.pb.h"
#include "tests/e2e/router_cluster.hpp"

using namespace outrider::test;
using namespace std::chrono_literals;
using json = nlohmann::json;

TEST_CASE("an overloaded engine is RESOURCE_EXHAUSTED to a gRPC client and "
          "503 to an HTTP one, not a worker gone") {
  // Slow engines with room for long requests: the two that fill it run
  // for minutes, not seconds, however busy the machine is.
  cluster c{1,
            {.num_blocks = 8192,
             .extra = {"--max-num-seqs", "1", "--max-waiting-requests", "1",
                       "--speedup", "0.5"}}};
  // Fill the engine directly: one request running, one waiting.
  auto sim_stub = openengine::v1::Inference::NewStub(c.sims[0]->channel());
  std::vector<std::unique_ptr<grpc::ClientContext>> holds;
  std::vector<std::thread> readers;
  auto load = [&](const char* key) {
    std::string body;
    if (http_get(c.sims[0]->debug, "/debug/load?rank=0", &body) != 200)
      return -1;
    auto doc = nlohmann::json::parse(body, nullptr, false);
    return doc.is_object() ? doc.value(key, -1) : -1;
  };
  // One after the other: the second must find the first running, not
  // waiting beside it (then the queue of one is full and it is refused).
  for (uint32_t i = 0; i < 2; ++i) {
    holds.push_back(std::make_unique<grpc::ClientContext>());
    auto* ctx = holds.back().get();
    ctx->set_deadline(std::chrono::system_clock::now() + 60s);
    readers.emplace_back([&sim_stub, ctx, i] {
      openengine::v1::GenerateRequest req;
      auto p = tokens(100 + 50 * i, 8);
      req.mutable_token_ids()->mutable_ids()->Add(p.begin(), p.end());
      req.mutable_stopping()->set_max_tokens(30000); // fits 32,768 tokens
      auto reader = sim_stub->Generate(ctx, req);
      openengine::v1::GenerateResponse resp;
      while (reader->Read(&resp)) {
      }
      auto st = reader->Finish();
      if (!st.ok() && st.error_code() != grpc::StatusCode::CANCELLED)
        std::fprintf(stderr, "filler %u: %s\n", i, st.error_message().c_str());
    });
    if (i == 0)
      eventually([&] { return load("running") == 1; }, 10s);
  }
  auto waiting = [&] { return load("running") == 1 && load("waiting") == 1; };
  bool full = eventually(waiting, 10s);
  if (!full) {
    std::string body;
    http_get(c.sims[0]->debug, "/debug/load?rank=0", &body);
    WARN("the engine's load: " << body);
  }
  if (full) {
    auto stub = openengine::v1::Inference::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(c.grpc_port),
                          grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 20s);
    openengine::v1::GenerateRequest req;
    auto p = tokens(900, 8);
    req.mutable_token_ids()->mutable_ids()->Add(p.begin(), p.end());
    req.mutable_stopping()->set_max_tokens(4);
    auto reader = stub->Generate(&ctx, req);
    openengine::v1::GenerateResponse resp;
    while (reader->Read(&resp)) {
    }
    auto st = reader->Finish();
    INFO(st.error_message());
    CHECK(st.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
    auto [code, body] =
      http(c.http_port, "POST", "/v1/completions",
           json{{"prompt", tokens(950, 8)}, {"max_tokens", 4}}.dump());
    INFO(body);
    CHECK(code == 503);
    CHECK(body.find("overloaded") != std::string::npos);
  }
  for (auto& h : holds)
    h->TryCancel();
  for (auto& t : readers)
    t.join();
  REQUIRE(full);
}
