// The relay's `Inference.Generate` on gRPC's callback API: no thread per
// stream. One object per request is both the server reactor (towards the
// router) and the sink of the engine call; it goes when both sides are done.
//
// Token coalescing: the engine is read at once, always; while a write to the
// router is in flight, token events that arrive are merged into the next
// message (OpenEngine `TokenOutput.tokens` is repeated), so a slow reader or
// a busy core never multiplies the per-message cost. When nothing is in
// flight a token goes out at once.

#include <chrono>
#include <deque>
#include <mutex>

#include "actors/sidecar/relay_impl.hpp"
#include "cluster/engine/engine_call.hpp"
#include "cluster/engine/token_queue.hpp"

namespace outrider::sidecar {

namespace {

namespace oe = openengine::v1;
using grpc::Status;
using grpc::StatusCode;
using clock_type = std::chrono::steady_clock;

class refused final : public grpc::ServerWriteReactor<oe::GenerateResponse> {
 public:
  explicit refused(Status st) { Finish(std::move(st)); }
  void OnDone() override { delete this; }
};

class relay_call final : public grpc::ServerWriteReactor<oe::GenerateResponse>,
                         public engine::generate_sink {
 public:
  relay_call(relay::impl& r, grpc::CallbackServerContext* sctx,
             const oe::GenerateRequest& in, engine::dialect d,
             const engine::call_target& target)
    : r_(r), sctx_(sctx) {
    auto leg = r_.begin_leg(in, d, target);
    id_ = std::move(leg.id);
    span_ = std::move(leg.span);
    // The router's deadline travels on to the engine; its cancellation too,
    // by OnCancel (not by gRPC's propagation, which would end the engine
    // call before OnCancel tells why).
    ectx_ = std::make_unique<grpc::ClientContext>();
    ectx_->set_deadline(sctx->deadline());
    auto req = in;
    req.set_request_id(id_);
    engine::start_generate(r_.channel, d, req, leg.to_engine, *ectx_, *this);
  }

  // Engine side (gRPC callback threads, one at a time).
  void on_response(oe::GenerateResponse&& resp, uint32_t n) override {
    std::unique_lock<std::mutex> guard{mtx_};
    if (client_gone_)
      return;
    if (n > 0 && tokens_ == 0)
      span_.event("first_token");
    tokens_ += n;
    engine::enqueue_coalesced(queue_, std::move(resp));
    if (n > 0 && !writing_)
      read_at_ = clock_type::now();
    write_next(guard);
  }

  void on_done(const Status& st) override {
    {
      std::unique_lock<std::mutex> guard{mtx_};
      engine_done_ = true;
      engine_done_flag_ = true;
      engine_status_ = st;
      if (!writing_)
        finish(guard);
    }
    release();
  }

  // Router side.
  void OnWriteDone(bool ok) override {
    std::unique_lock<std::mutex> guard{mtx_};
    writing_ = false;
    if (!ok) {
      client_gone_ = true;
      queue_.clear();
    }
    if (!queue_.empty() && !client_gone_)
      return write_next(guard);
    if (engine_done_)
      return finish(guard);
    guard.unlock();
    if (!ok)
      cancel_engine();
  }

  void OnCancel() override {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      client_gone_ = true;
    }
    cancel_engine();
  }

  void OnDone() override { release(); }

 private:
  // Never under mtx_: cancelling may run the engine call's end at once.
  void cancel_engine() {
    if (!engine_done_flag_.load())
      ectx_->TryCancel();
  }

  // Starts the next write when none is in flight.
  void write_next(std::unique_lock<std::mutex>& guard) {
    if (writing_ || queue_.empty())
      return;
    writing_ = true;
    out_ = std::move(queue_.front());
    queue_.pop_front();
    auto n = out_.has_token() ? out_.token().tokens_size() : 0;
    guard.unlock();
    if (n > 0) {
      r_.m.tokens.inc(static_cast<uint64_t>(n));
      r_.m.token_latency.observe(
        std::chrono::duration<double>(clock_type::now() - read_at_).count());
    }
    StartWrite(&out_);
  }

  // Both the engine call and the writes are done: the answer.
  void finish(std::unique_lock<std::mutex>&) {
    if (finished_)
      return;
    finished_ = true;
    auto st = r_.verdict(client_gone_ || sctx_->IsCancelled(), engine_status_,
                         id_, tokens_);
    r_.end_leg(span_, st, tokens_);
    Finish(std::move(st));
  }

  void release() {
    if (--refs_ == 0) {
      r_.m.inflight.add(-1);
      delete this;
    }
  }

  relay::impl& r_;
  grpc::CallbackServerContext* sctx_;
  std::unique_ptr<grpc::ClientContext> ectx_;
  std::string id_;
  std::atomic<int> refs_{2}; // the server call and the engine call
  std::mutex mtx_;
  std::deque<oe::GenerateResponse> queue_; // guarded by mtx_
  oe::GenerateResponse out_;               // the write in flight
  clock_type::time_point read_at_{};
  bool writing_ = false;     // guarded by mtx_
  bool engine_done_ = false; // guarded by mtx_
  std::atomic<bool> engine_done_flag_{false};
  bool client_gone_ = false; // guarded by mtx_
  bool finished_ = false;    // guarded by mtx_
  Status engine_status_;     // guarded by mtx_
  uint32_t tokens_ = 0;      // guarded by mtx_
  trace::span span_;         // guarded by mtx_ once the call runs
};

class generate_service final : public oe::Inference::CallbackService {
 public:
  explicit generate_service(relay::impl& r) : r_(r) {}

  grpc::ServerWriteReactor<oe::GenerateResponse>*
  Generate(grpc::CallbackServerContext* ctx,
           const oe::GenerateRequest* in) override {
    if (auto status = r_.over_limit())
      return new refused(std::move(*status));
    if (auto status = r_.misaddressed(ctx->client_metadata()))
      return new refused(std::move(*status));
    // The rank and priority are read once, here, as numbers: garbage is
    // refused, never read as rank 0.
    std::string why;
    auto target = engine::call_target_of_call(ctx->client_metadata(), &why);
    if (!target)
      return new refused({StatusCode::INVALID_ARGUMENT, why});
    auto d = r_.resolve();
    if (d == engine::dialect::unknown) {
      r_.m.broken.inc();
      return new refused({StatusCode::UNAVAILABLE,
                          "engine stream broke: the engine is not reachable"});
    }
    return new relay_call(r_, ctx, *in, d, *target);
  }

 private:
  relay::impl& r_;
};

} // namespace

std::unique_ptr<grpc::Service> make_generate_service(relay::impl& r) {
  return std::make_unique<generate_service>(r);
}

} // namespace outrider::sidecar
