#include "cluster/engine/health_watch.hpp"

#include <grpcpp/grpcpp.h>

#include "grpc/health/v1/health.grpc.pb.h"

namespace outrider::engine {

health_watch::health_watch(std::string endpoint, backoff b, callback cb)
  : endpoint_(std::move(endpoint)), backoff_(b), cb_(std::move(cb)) {
  thread_ = std::thread([this] { run(); });
}

health_watch::~health_watch() {
  stop();
}

void health_watch::stop() {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    stopping_ = true;
    if (call_)
      call_->TryCancel();
  }
  cv_.notify_all();
  if (thread_.joinable())
    thread_.join();
}

void health_watch::run() {
  using grpc::health::v1::Health;
  using grpc::health::v1::HealthCheckRequest;
  using grpc::health::v1::HealthCheckResponse;
  auto delay = backoff_.initial;
  // gRPC's own reconnect backoff defaults to 1 s growing to 120 s; keep it
  // in step with ours so a restarted engine is seen quickly.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS,
              static_cast<int>(backoff_.initial.count()));
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS,
              static_cast<int>(backoff_.initial.count()));
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS,
              static_cast<int>(backoff_.max.count()));
  auto channel = grpc::CreateCustomChannel(
    endpoint_, grpc::InsecureChannelCredentials(), args);
  auto stub = Health::NewStub(channel);
  bool reported_down = false;
  for (;;) {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      if (stopping_)
        return;
    }
    // Fail-fast RPCs on a channel in backoff fail at once; wait (in short
    // slices, to notice stop()) until the channel itself has connected.
    if (!channel->WaitForConnected(std::chrono::system_clock::now() +
                                   std::chrono::milliseconds{250})) {
      if (!reported_down) {
        reported_down = true;
        cb_(engine_health::unreachable, "cannot connect to " + endpoint_);
      }
      continue;
    }
    auto ctx = std::make_shared<grpc::ClientContext>();
    {
      std::lock_guard<std::mutex> guard{mtx_};
      if (stopping_)
        return;
      call_ = ctx;
    }
    HealthCheckRequest req;
    auto reader = stub->Watch(ctx.get(), req);
    HealthCheckResponse resp;
    while (reader->Read(&resp)) {
      delay = backoff_.initial;
      reported_down = false;
      cb_(static_cast<engine_health>(resp.status()), {});
    }
    auto status = reader->Finish();
    std::unique_lock<std::mutex> guard{mtx_};
    call_.reset();
    if (stopping_)
      return;
    guard.unlock();
    if (!reported_down) {
      reported_down = true;
      cb_(engine_health::unreachable, status.error_message());
    }
    guard.lock();
    cv_.wait_for(guard, delay, [this] { return stopping_; });
    delay = std::min(delay * 2, backoff_.max);
  }
}

} // namespace outrider::engine
