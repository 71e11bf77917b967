#include "bench/grpc_load.hpp"

#include <chrono>
#include <condition_variable>
#include <mutex>

#include <grpcpp/grpcpp.h>

#include "openengine.grpc.pb.h"

namespace outrider::bench {

namespace {

namespace oe = openengine::v1;
using clock_type = std::chrono::steady_clock;

double seconds_between(clock_type::time_point a, clock_type::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

struct countdown {
  std::mutex mtx;
  std::condition_variable cv;
  size_t left = 0;
  void done() {
    std::lock_guard<std::mutex> guard{mtx};
    if (--left == 0)
      cv.notify_all();
  }
};

// One stream: reads every response, times the token messages, reports to
// the countdown when gRPC is done with it (then deletes itself).
class stream final : public grpc::ClientReadReactor<oe::GenerateResponse> {
 public:
  stream(oe::Inference::Stub& stub, oe::GenerateRequest req,
         grpc_stream_result& out, countdown& left, double deadline_s)
    : req_(std::move(req)), out_(out), left_(left) {
    ctx_.set_deadline(
      std::chrono::system_clock::now() +
      std::chrono::milliseconds{static_cast<int64_t>(deadline_s * 1000)});
    stub.async()->Generate(&ctx_, &req_, this);
    StartRead(&resp_);
    StartCall();
  }

  void OnReadDone(bool ok) override {
    if (!ok)
      return;
    if (resp_.has_token()) {
      auto now = clock_type::now();
      if (out_.tokens == 0)
        out_.ttft_s = seconds_between(t0_, now);
      else
        out_.gaps_s.push_back(seconds_between(last_, now));
      last_ = now;
      out_.tokens += static_cast<uint32_t>(resp_.token().tokens_size());
    }
    StartRead(&resp_);
  }

  void OnDone(const grpc::Status& st) override {
    out_.ok = st.ok();
    auto& left = left_;
    delete this;
    left.done();
  }

 private:
  grpc::ClientContext ctx_;
  oe::GenerateRequest req_;
  oe::GenerateResponse resp_;
  grpc_stream_result& out_;
  countdown& left_;
  clock_type::time_point t0_ = clock_type::now();
  clock_type::time_point last_ = t0_;
};

} // namespace

std::vector<grpc_stream_result>
run_grpc_load(const std::string& endpoint, size_t streams, unsigned prompt_len,
              unsigned max_tokens, double deadline_s) {
  auto channel =
    grpc::CreateChannel(endpoint, grpc::InsecureChannelCredentials());
  auto stub = oe::Inference::NewStub(channel);
  std::vector<grpc_stream_result> results(streams);
  countdown left;
  left.left = streams;
  for (size_t s = 0; s < streams; ++s) {
    oe::GenerateRequest req;
    for (uint32_t i = 0; i < prompt_len; ++i)
      req.mutable_token_ids()->add_ids(
        1 + (static_cast<uint32_t>(s) * 7919 + i) % 31000);
    req.mutable_stopping()->set_max_tokens(max_tokens);
    new stream(*stub, std::move(req), results[s], left, deadline_s);
  }
  std::unique_lock<std::mutex> guard{left.mtx};
  left.cv.wait(guard, [&] { return left.left == 0; });
  return results;
}

} // namespace outrider::bench
