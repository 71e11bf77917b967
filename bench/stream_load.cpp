#include "bench/stream_load.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "openengine.grpc.pb.h"
#include "vllm.grpc.pb.h"

namespace outrider::bench {

namespace {

std::vector<uint32_t> prompt_for(int stream, int n, unsigned len) {
  std::vector<uint32_t> p;
  for (uint32_t i = 0; i < len; ++i)
    p.push_back(1 + (static_cast<uint32_t>(stream * 7919 + n * 104729) + i) %
                      31000);
  return p;
}

// One request; returns the tokens received (0 on failure).
uint64_t one(api which, grpc::Channel& ch, const std::vector<uint32_t>& p,
             unsigned max_tokens) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::chrono::seconds{300});
  uint64_t n = 0;
  if (which == api::vllm) {
    auto stub = vllm::Inference::NewStub(
      std::shared_ptr<grpc::Channel>(&ch, [](auto*) {}));
    vllm::GenerateRequest req;
    req.mutable_token_ids()->mutable_ids()->Add(p.begin(), p.end());
    req.mutable_stopping()->set_max_new_tokens(max_tokens);
    auto reader = stub->GenerateStream(&ctx, req);
    vllm::GenerateResponse resp;
    while (reader->Read(&resp))
      n += static_cast<uint64_t>(resp.outputs().token_ids_size());
    return reader->Finish().ok() ? n : 0;
  }
  auto stub = openengine::v1::Inference::NewStub(
    std::shared_ptr<grpc::Channel>(&ch, [](auto*) {}));
  openengine::v1::GenerateRequest req;
  req.mutable_token_ids()->mutable_ids()->Add(p.begin(), p.end());
  req.mutable_stopping()->set_max_tokens(max_tokens);
  auto reader = stub->Generate(&ctx, req);
  openengine::v1::GenerateResponse resp;
  while (reader->Read(&resp))
    if (resp.has_token())
      n += static_cast<uint64_t>(resp.token().tokens_size());
  return reader->Finish().ok() ? n : 0;
}

} // namespace

double stream_rate(const std::string& endpoint, api which, int streams,
                   int rounds, unsigned prompt_len, unsigned max_tokens) {
  auto channel =
    grpc::CreateChannel(endpoint, grpc::InsecureChannelCredentials());
  std::atomic<uint64_t> tokens{0};
  std::atomic<int> errors{0};
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int s = 0; s < streams; ++s)
    threads.emplace_back([&, s] {
      for (int r = 0; r < rounds; ++r) {
        auto n = one(which, *channel, prompt_for(s, r, prompt_len), max_tokens);
        if (n != max_tokens)
          errors.fetch_add(1);
        tokens.fetch_add(n);
      }
    });
  for (auto& t : threads)
    t.join();
  if (errors.load() > 0)
    std::fprintf(stderr, "warning: %d streams failed or were short\n",
                 errors.load());
  return static_cast<double>(tokens.load()) /
         std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
           .count();
}

bool wait_connected(const std::string& endpoint) {
  auto channel =
    grpc::CreateChannel(endpoint, grpc::InsecureChannelCredentials());
  return channel->WaitForConnected(std::chrono::system_clock::now() +
                                   std::chrono::seconds{10});
}

} // namespace outrider::bench
