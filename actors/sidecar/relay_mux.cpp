// The relay's `RelayMux.Relay` (proto/relay_mux.proto): one bidirectional
// stream from a router carries many relayed requests. Each request is an
// engine call of its own (as `Inference.Generate` makes it: relay_leg.cpp);
// what the engine calls answer is gathered into the stream's next message,
// so that the tokens of one engine step, across every request of this
// router, reach the router in one message while a write is in flight, and
// each token alone when nothing is. The router reads one message per step
// instead of one per request and token (issue 31, docs/router.md). When the
// relay's server shuts down (stop, restart) its streams refuse requests
// opened from then on and mark their messages `draining`: the router places
// them elsewhere instead of having them cut when the grace ends.

#include <memory>
#include <mutex>
#include <unordered_map>

#include "actors/sidecar/relay_impl.hpp"
#include "cluster/engine/mux_outbox.hpp"
#include "cluster/engine/token_queue.hpp"
#include "relay_mux.grpc.pb.h"

namespace outrider::sidecar {

namespace {

namespace oe = openengine::v1;
namespace mx = outrider::relaymux::v1;
using grpc::Status;
using grpc::StatusCode;

class mux_stream;

// One request of a stream: its engine call. Kept alive by itself until the
// engine call ends, and by whoever cancels it meanwhile.
class mux_leg final : public engine::generate_sink {
 public:
  mux_leg(mux_stream& s, uint64_t id) : s_(s), mux_id_(id) {}

  void start(relay::impl& r, const mx::Open& o, engine::dialect d,
             std::shared_ptr<mux_leg> self);
  void cancel() {
    client_gone_ = true;
    ctx_.TryCancel();
  }

  void on_response(oe::GenerateResponse&& resp, uint32_t n) override;
  void on_done(const Status& st) override;

 private:
  mux_stream& s_;
  uint64_t mux_id_;
  std::string id_; // the engine's request id
  trace::span span_;
  grpc::ClientContext ctx_;
  std::atomic<bool> client_gone_{false};
  uint32_t tokens_ = 0; // engine callbacks only, one at a time
  relay::impl* r_ = nullptr;
  std::shared_ptr<mux_leg> self_;
};

class mux_stream final
  : public grpc::ServerBidiReactor<mx::MuxRequest, mx::MuxResponse> {
 public:
  mux_stream(relay::impl& r, grpc::CallbackServerContext* ctx,
             std::shared_ptr<std::atomic<bool>> draining)
    : r_(r), draining_(std::move(draining)) {
    if (auto status = r_.misaddressed(ctx->client_metadata())) {
      finished_ = true;
      Finish(std::move(*status));
      return;
    }
    counted_ = true;
    r_.m.mux_streams.add(1);
    StartRead(&in_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      // The router closed its side or went: nothing more will be asked.
      {
        std::lock_guard<std::mutex> guard{mtx_};
        reading_done_ = true;
      }
      cancel_all();
      return maybe_finish();
    }
    for (auto& o : *in_.mutable_open())
      open(o);
    for (auto id : in_.cancel())
      cancel(id);
    in_.Clear();
    StartRead(&in_);
  }

  void OnWriteDone(bool ok) override {
    std::unique_lock<std::mutex> guard{mtx_};
    writing_ = false;
    if (!ok) {
      gone_ = true;
      pending_.clear();
      guard.unlock();
      cancel_all();
      return maybe_finish();
    }
    if (!pending_.empty())
      return write_next(guard);
    guard.unlock();
    maybe_finish();
  }

  void OnCancel() override {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      gone_ = true;
    }
    cancel_all();
  }

  void OnDone() override { release(); }

  // From the legs, on the engine calls' callback threads.
  void emit(uint64_t id, oe::GenerateResponse&& resp, uint32_t n) {
    std::unique_lock<std::mutex> guard{mtx_};
    if (gone_)
      return;
    auto& u = pending_.update_for(id);
    // Consecutive token events of one request merge, as the per-request
    // stream's queue merges them.
    auto n_resp = u.responses_size();
    if (n_resp == 0 ||
        !engine::merge_tokens(*u.mutable_responses(n_resp - 1), resp))
      *u.add_responses() = std::move(resp);
    r_.m.tokens.inc(n);
    write_next(guard);
  }

  // A leg's end (`leg`) or a refused open's (not a leg: an id already
  // open keeps its leg).
  void end(uint64_t id, const Status& st, bool leg = true) {
    std::unique_lock<std::mutex> guard{mtx_};
    if (leg)
      legs_.erase(id);
    if (!gone_) {
      pending_.end(id, st);
      write_next(guard);
    }
    if (guard.owns_lock())
      guard.unlock();
    maybe_finish();
  }

  void hold() { ++refs_; }
  void release() {
    if (--refs_ > 0)
      return;
    if (counted_)
      r_.m.mux_streams.add(-1);
    delete this;
  }

 private:
  void open(const mx::Open& o) {
    auto id = o.id();
    std::optional<Status> refuse;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      if (gone_)
        return; // nothing more is written: no answer to send
      if (legs_.count(id))
        refuse = Status{StatusCode::INVALID_ARGUMENT,
                        "request id " + std::to_string(id) +
                          " is already open on this stream"};
    }
    auto d = r_.resolve();
    if (!refuse && draining_->load()) {
      // Its server shuts down: placed elsewhere, it need not be cut when
      // the grace ends.
      r_.m.refused.inc();
      refuse = Status{StatusCode::UNAVAILABLE,
                      "the relay is shutting down: open the request elsewhere"};
    }
    if (!refuse)
      refuse = r_.over_limit();
    if (!refuse && d == engine::dialect::unknown) {
      r_.m.broken.inc();
      refuse = Status{StatusCode::UNAVAILABLE,
                      "engine stream broke: the engine is not reachable"};
    }
    if (refuse)
      return end(id, *refuse, false);
    auto leg = std::make_shared<mux_leg>(*this, id);
    {
      std::lock_guard<std::mutex> guard{mtx_};
      legs_[id] = leg;
    }
    hold(); // released by the leg's end
    leg->start(r_, o, d, leg);
  }

  void cancel(uint64_t id) {
    std::shared_ptr<mux_leg> leg;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      auto it = legs_.find(id);
      if (it == legs_.end())
        return; // ended already: its end is on its way
      leg = it->second;
    }
    leg->cancel(); // never under mtx_: the engine call may end at once
  }

  void cancel_all() {
    std::vector<std::shared_ptr<mux_leg>> legs;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      for (const auto& [id, leg] : legs_)
        legs.push_back(leg);
    }
    for (const auto& leg : legs)
      leg->cancel();
  }

  // Starts a write of everything gathered, unless one is in flight.
  void write_next(std::unique_lock<std::mutex>& guard) {
    if (writing_ || pending_.empty() || gone_)
      return;
    writing_ = true;
    pending_.take(out_);
    if (draining_->load())
      out_.set_draining(true); // the router opens no more here
    guard.unlock();
    StartWrite(&out_);
  }

  // Reading is over, every leg ended and its end was written: the answer.
  // Only once the read side ended (a read is always outstanding until
  // then; a router that went fails it too), so no read starts after Finish.
  void maybe_finish() {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      if (finished_ || !reading_done_ || !legs_.empty() || writing_ ||
          (!pending_.empty() && !gone_))
        return;
      finished_ = true;
    }
    Finish(Status::OK);
  }

  relay::impl& r_;
  const std::shared_ptr<std::atomic<bool>> draining_; // its server's
  mx::MuxRequest in_;                                 // the read in flight
  std::atomic<int> refs_{1}; // gRPC's, until OnDone; one per leg
  std::mutex mtx_;
  std::unordered_map<uint64_t, std::shared_ptr<mux_leg>> legs_; // mtx_
  engine::mux_outbox pending_; // mtx_: the next message
  mx::MuxResponse out_;        // the write in flight
  bool writing_ = false;       // mtx_
  bool reading_done_ = false;  // mtx_
  bool gone_ = false;          // mtx_: the router went
  bool finished_ = false;      // mtx_
  bool counted_ = false;       // in outrider_relay_mux_streams
};

void mux_leg::start(relay::impl& r, const mx::Open& o, engine::dialect d,
                    std::shared_ptr<mux_leg> self) {
  self_ = std::move(self);
  r_ = &r;
  engine::call_target target;
  if (o.has_dp_rank())
    target.dp_rank = o.dp_rank();
  if (o.has_priority())
    target.priority = o.priority();
  target.hops = o.hops();
  target.traceparent = o.traceparent();
  target.tracestate = o.tracestate();
  auto leg = r.begin_leg(o.request(), d, target);
  id_ = std::move(leg.id);
  span_ = std::move(leg.span);
  span_.set("outrider.relay_mux", true);
  if (o.timeout_ms() > 0)
    ctx_.set_deadline(std::chrono::system_clock::now() +
                      std::chrono::milliseconds{o.timeout_ms()});
  auto req = o.request();
  req.set_request_id(id_);
  engine::start_generate(r.channel, d, req, leg.to_engine, ctx_, *this);
}

void mux_leg::on_response(oe::GenerateResponse&& resp, uint32_t n) {
  if (n > 0 && tokens_ == 0)
    span_.event("first_token");
  tokens_ += n;
  s_.emit(mux_id_, std::move(resp), n);
}

void mux_leg::on_done(const Status& st) {
  auto v = r_->verdict(client_gone_.load(), st, id_, tokens_);
  r_->end_leg(span_, v, tokens_);
  r_->m.inflight.add(-1);
  auto& s = s_;
  auto keep = std::move(self_); // this may go with `keep`
  s.end(mux_id_, v);
  s.release();
}

class mux_service final : public mx::RelayMux::CallbackService {
 public:
  explicit mux_service(relay::impl& r) : r_(r), draining_(r.mux_draining) {}

  grpc::ServerBidiReactor<mx::MuxRequest, mx::MuxResponse>*
  Relay(grpc::CallbackServerContext* ctx) override {
    return new mux_stream(r_, ctx, draining_);
  }

 private:
  relay::impl& r_;
  std::shared_ptr<std::atomic<bool>> draining_; // set as its server stops
};

} // namespace

std::unique_ptr<grpc::Service> make_mux_service(relay::impl& r) {
  return std::make_unique<mux_service>(r);
}

} // namespace outrider::sidecar
