#include "cluster/engine/health_watch.hpp"

#include <algorithm>

#include <grpcpp/alarm.h>
#include <grpcpp/grpcpp.h>

#include "grpc/health/v1/health.grpc.pb.h"
#include "sglang.grpc.pb.h"

namespace outrider::engine {

namespace {

using grpc::health::v1::Health;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

} // namespace

class health_watch::call_base {
 public:
  virtual ~call_base() = default;
  virtual void cancel() = 0;

 protected:
  // The stream ended: the call goes, then the watch hears why.
  static void done(health_watch& w, const grpc::Status& st, call_base* self) {
    auto why = st.error_message();
    delete self;
    w.closed(why);
  }
};

// One Watch stream; deletes itself when gRPC is done with it.
class health_watch::call final
  : public call_base,
    public grpc::ClientReadReactor<HealthCheckResponse> {
 public:
  call(health_watch& w, Health::Stub& stub) : w_(w) {
    stub.async()->Watch(&ctx_, &req_, this);
    StartRead(&resp_);
    StartCall();
  }

  void cancel() override { ctx_.TryCancel(); }

  void OnReadDone(bool ok) override {
    if (!ok)
      return; // OnDone follows
    w_.status(static_cast<engine_health>(resp_.status()));
    StartRead(&resp_);
  }

  void OnDone(const grpc::Status& st) override { done(w_, st, this); }

 private:
  health_watch& w_;
  grpc::ClientContext ctx_;
  HealthCheckRequest req_;
  HealthCheckResponse resp_;
};

// One WatchEngineState stream (SGLang); deletes itself when gRPC is done.
class health_watch::state_call final
  : public call_base,
    public grpc::ClientReadReactor<sglang::runtime::v1::EngineStateSnapshot> {
 public:
  state_call(health_watch& w, sglang::runtime::v1::SglangService::Stub& stub)
    : w_(w) {
    stub.async()->WatchEngineState(&ctx_, &req_, this);
    StartRead(&snap_);
    StartCall();
  }

  void cancel() override { ctx_.TryCancel(); }

  void OnReadDone(bool ok) override {
    if (!ok)
      return; // OnDone follows
    using sglang::runtime::v1::SERVER_STATUS_STARTING;
    using sglang::runtime::v1::SERVER_STATUS_UNHEALTHY;
    bool up = snap_.healthy() && !snap_.is_pause() &&
              snap_.server_status() != SERVER_STATUS_STARTING &&
              snap_.server_status() != SERVER_STATUS_UNHEALTHY;
    w_.status(up ? engine_health::serving : engine_health::not_serving);
    StartRead(&snap_);
  }

  void OnDone(const grpc::Status& st) override { done(w_, st, this); }

 private:
  health_watch& w_;
  grpc::ClientContext ctx_;
  sglang::runtime::v1::WatchEngineStateRequest req_;
  sglang::runtime::v1::EngineStateSnapshot snap_;
};

health_watch::health_watch(std::string endpoint, backoff b, callback cb,
                           source src)
  : endpoint_(std::move(endpoint)), backoff_(b), cb_(std::move(cb)),
    source_(src), delay_(b.initial) {
  // gRPC's own reconnect backoff defaults to 1 s growing to 120 s; keep it
  // in step with ours so a restarted engine is seen quickly. gRPC 1.51 reads
  // GRPC_ARG_MIN_RECONNECT_BACKOFF_MS as the least time a connection
  // attempt is given (its deadline is the later of that and the next
  // backoff): set to the initial backoff (100 ms), an engine that took
  // longer to answer the handshake was reported unreachable.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS,
              static_cast<int>(backoff_.initial.count()));
  args.SetInt(
    GRPC_ARG_MIN_RECONNECT_BACKOFF_MS,
    static_cast<int>(std::max(backoff_.connect, backoff_.initial).count()));
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS,
              static_cast<int>(backoff_.max.count()));
  channel_ = grpc::CreateCustomChannel(
    endpoint_, grpc::InsecureChannelCredentials(), args);
  if (source_ == source::sglang_state)
    stub_ = std::shared_ptr<sglang::runtime::v1::SglangService::Stub>(
      sglang::runtime::v1::SglangService::NewStub(channel_));
  else
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
  using sglang::runtime::v1::SglangService;
  if (source_ == source::sglang_state)
    call_ = new state_call(
      *this, *std::static_pointer_cast<SglangService::Stub>(stub_));
  else
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
