#include "cluster/engine/health_watch.hpp"

#include <grpcpp/alarm.h>
#include <grpcpp/grpcpp.h>

#include "grpc/health/v1/health.grpc.pb.h"

namespace outrider::engine {

namespace {

using grpc::health::v1::Health;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

} // namespace

// One Watch stream; deletes itself when gRPC is done with it.
class health_watch::call final
  : public grpc::ClientReadReactor<HealthCheckResponse> {
 public:
  call(health_watch& w, Health::Stub& stub) : w_(w) {
    stub.async()->Watch(&ctx_, &req_, this);
    StartRead(&resp_);
    StartCall();
  }

  void cancel() { ctx_.TryCancel(); }

  void OnReadDone(bool ok) override {
    if (!ok)
      return; // OnDone follows
    w_.status(static_cast<engine_health>(resp_.status()));
    StartRead(&resp_);
  }

  void OnDone(const grpc::Status& st) override {
    auto& w = w_;
    auto why = st.error_message();
    delete this;
    w.closed(why);
  }

 private:
  health_watch& w_;
  grpc::ClientContext ctx_;
  HealthCheckRequest req_;
  HealthCheckResponse resp_;
};

health_watch::health_watch(std::string endpoint, backoff b, callback cb)
  : endpoint_(std::move(endpoint)), backoff_(b), cb_(std::move(cb)),
    delay_(b.initial) {
  // gRPC's own reconnect backoff defaults to 1 s growing to 120 s; keep it
  // in step with ours so a restarted engine is seen quickly.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS,
              static_cast<int>(backoff_.initial.count()));
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS,
              static_cast<int>(backoff_.initial.count()));
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS,
              static_cast<int>(backoff_.max.count()));
  channel_ = grpc::CreateCustomChannel(
    endpoint_, grpc::InsecureChannelCredentials(), args);
  stub_ = std::shared_ptr<Health::Stub>(Health::NewStub(channel_));
  std::lock_guard<std::mutex> guard{mtx_};
  open();
}

health_watch::~health_watch() {
  stop();
}

void health_watch::stop() {
  std::unique_lock<std::mutex> guard{mtx_};
  stopping_ = true;
  if (call_)
    call_->cancel();
  if (alarm_ && waiting_)
    alarm_->Cancel();
  idle_.wait(guard, [this] { return call_ == nullptr && !waiting_; });
}

// Under mtx_. A fail-fast call: while the engine cannot be reached it ends
// at once with UNAVAILABLE, and the next try waits for the backoff.
void health_watch::open() {
  call_ = new call(*this, *std::static_pointer_cast<Health::Stub>(stub_));
}

void health_watch::status(engine_health h) {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    delay_ = backoff_.initial;
    reported_down_ = false;
    if (stopping_)
      return;
  }
  cb_(h, {});
}

void health_watch::closed(const std::string& why) {
  std::unique_lock<std::mutex> guard{mtx_};
  call_ = nullptr;
  if (stopping_) {
    idle_.notify_all();
    return;
  }
  bool report = !reported_down_;
  reported_down_ = true;
  auto delay = delay_;
  delay_ = std::min(delay_ * 2, backoff_.max);
  waiting_ = true;
  alarm_ = std::make_unique<grpc::Alarm>();
  alarm_->Set(std::chrono::system_clock::now() + delay, [this](bool) {
    std::lock_guard<std::mutex> g{mtx_};
    waiting_ = false;
    if (stopping_)
      idle_.notify_all();
    else
      open();
  });
  guard.unlock();
  if (report)
    cb_(engine_health::unreachable,
        why.empty() ? "cannot reach " + endpoint_ : why);
}

} // namespace outrider::engine
