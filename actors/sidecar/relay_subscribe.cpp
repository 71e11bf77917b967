// The relay's `Control.SubscribeKvEvents` on gRPC's callback API: no
// thread per subscriber. The subscription wakes the writer when a batch
// arrives (kv_subscription::notify_once); one write is in flight at a time,
// and what arrives meanwhile goes out after it, in order. A subscriber that
// falls `capacity` batches behind gets a retryable OVERLOADED error.
// A snapshot's stream starts with metadata saying where the snapshot stands
// on the hub's numbering (kv_snapshot_metadata): how a router on the NATS
// event plane knows which published batches the snapshot already holds.
#include <deque>

#include <caf/all.hpp>

#include "actors/sidecar/event_hub.hpp"
#include "actors/sidecar/kv_publisher.hpp"
#include "actors/sidecar/relay_impl.hpp"
#include "cluster/kv/kv_proto.hpp"
#include "runtime/ask.hpp"

namespace outrider::sidecar {

namespace {

namespace oe = openengine::v1;
using grpc::Status;
using grpc::StatusCode;
using response = oe::SubscribeKvEventsResponse;

constexpr size_t subscriber_capacity = 10000;

class kv_stream;

// What outlives the reactor: a wake-up may come after gRPC is done with
// it, and then finds `stream` null.
struct stream_state {
  std::mutex mtx;
  kv_stream* stream = nullptr; // guarded by mtx
};

class kv_stream final : public grpc::ServerWriteReactor<response> {
 public:
  kv_stream(std::shared_ptr<kv_subscription> sub,
            grpc::CallbackServerContext* ctx)
    : sub_(std::move(sub)), ctx_(ctx),
      state_(std::make_shared<stream_state>()) {
    state_->stream = this;
  }

  /// Sends the snapshot's place on the hub's numbering as initial metadata,
  /// before any batch (nothing is written until the snapshot is pushed).
  static void announce(const std::weak_ptr<stream_state>& weak, uint64_t epoch,
                       uint64_t position, size_t batches) {
    auto state = weak.lock();
    if (!state)
      return;
    std::lock_guard<std::mutex> guard{state->mtx};
    auto* s = state->stream;
    if (!s || s->finished_ || s->writing_)
      return;
    s->ctx_->AddInitialMetadata(kv::kv_epoch_key, std::to_string(epoch));
    s->ctx_->AddInitialMetadata(kv::kv_position_key, std::to_string(position));
    s->ctx_->AddInitialMetadata(kv::kv_batches_key, std::to_string(batches));
    s->StartSendInitialMetadata();
  }

  /// Starts writing what the subscription holds and waiting for more.
  void start() {
    std::lock_guard<std::mutex> guard{state_->mtx};
    pump();
  }

  /// Ends the stream with `st`, unless gRPC is done with it already.
  static void fail(const std::weak_ptr<stream_state>& weak, Status st) {
    auto state = weak.lock();
    if (!state)
      return;
    std::lock_guard<std::mutex> guard{state->mtx};
    if (auto* s = state->stream) {
      s->status_ = std::move(st);
      s->ending_ = true;
      s->pump();
    }
  }

  std::weak_ptr<stream_state> state() const { return state_; }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> guard{state_->mtx};
    writing_ = false;
    if (!ok)
      ending_ = true;
    pump();
  }

  void OnCancel() override {
    std::lock_guard<std::mutex> guard{state_->mtx};
    ending_ = true;
    pump();
  }

  void OnDone() override {
    {
      std::lock_guard<std::mutex> guard{state_->mtx};
      state_->stream = nullptr;
    }
    delete this;
  }

 private:
  // Under state_->mtx: the next write, the end, or a wake-up to wait for.
  void pump() {
    if (writing_ || finished_)
      return;
    if (ending_) {
      finished_ = true;
      return Finish(status_);
    }
    while (queue_.empty()) {
      fill();
      if (ending_ && queue_.empty()) {
        finished_ = true;
        return Finish(status_);
      }
      if (!queue_.empty())
        break;
      std::weak_ptr<stream_state> weak = state_;
      bool armed = sub_->notify_once([weak] {
        auto st = weak.lock();
        if (!st)
          return;
        std::lock_guard<std::mutex> guard{st->mtx};
        if (st->stream)
          st->stream->pump();
      });
      if (armed)
        return;
    }
    writing_ = true;
    current_ = std::move(queue_.front());
    queue_.pop_front();
    StartWrite(&current_);
  }

  void fill() {
    for (const auto& b : sub_->take()) {
      response resp;
      batch_to_proto(*b, resp.mutable_batch());
      queue_.push_back(std::move(resp));
    }
    if (queue_.empty() && sub_->overflowed()) {
      response resp;
      auto* err = resp.mutable_error();
      err->set_code(oe::ERROR_CODE_OVERLOADED);
      err->set_message("subscriber too slow; resubscribe with a snapshot");
      err->set_retryable(true);
      queue_.push_back(std::move(resp));
      ending_ = true;
    }
  }

  std::shared_ptr<kv_subscription> sub_;
  grpc::CallbackServerContext* ctx_; // gRPC's, valid until OnDone
  std::shared_ptr<stream_state> state_;
  std::deque<response> queue_; // guarded by state_->mtx
  response current_;           // being written
  Status status_;              // guarded by state_->mtx
  bool writing_ = false;       // guarded by state_->mtx
  bool ending_ = false;        // guarded by state_->mtx
  bool finished_ = false;      // guarded by state_->mtx
};

class refused final : public grpc::ServerWriteReactor<response> {
 public:
  explicit refused(Status st) { Finish(std::move(st)); }
  void OnDone() override { delete this; }
};

} // namespace

grpc::ServerWriteReactor<response>*
subscribe_kv_events(relay::impl& r, grpc::CallbackServerContext* ctx,
                    const oe::SubscribeKvEventsRequest& in) {
  if (auto status = r.misaddressed(ctx->client_metadata()))
    return new refused(std::move(*status));
  std::set<int> ranks(in.data_parallel_ranks().begin(),
                      in.data_parallel_ranks().end());
  auto sub = std::make_shared<kv_subscription>(ranks, subscriber_capacity);
  if (!in.include_snapshot()) {
    std::optional<uint64_t> start;
    if (in.has_start_sequence_number())
      start = in.start_sequence_number();
    if (!r.cfg.hub->subscribe(sub, start))
      return new refused({StatusCode::OUT_OF_RANGE,
                          "the sidecar no longer has batches from sequence " +
                            std::to_string(*start) +
                            "; resubscribe with include_snapshot"});
    auto* s = new kv_stream(sub, ctx);
    s->start();
    return s;
  }
  auto idx = r.cfg.indexer->get();
  if (!idx)
    return new refused({StatusCode::UNAVAILABLE, "the index is restarting"});
  // The snapshot first, then live batches: the indexer hands the snapshot
  // over and subscribes in one step, so nothing falls between. Asked from a
  // short-lived actor, so no gRPC thread waits for the indexer.
  auto hub = r.cfg.hub;
  auto* s = new kv_stream(sub, ctx);
  // Runs on the indexer's thread, where the hub's position is exactly what
  // the snapshot holds.
  indexer::snapshot_callback cb = [sub, hub, weak = s->state()](auto snapshot) {
    std::erase_if(snapshot,
                  [&](const auto& b) { return !sub->wants(b->rank); });
    kv_stream::announce(weak, hub->epoch(), hub->position(), snapshot.size());
    for (auto& b : snapshot)
      sub->push(std::move(b));
    hub->subscribe(sub, std::nullopt);
  };
  s->start(); // waits for the snapshot's batches
  // On a gRPC thread, which outlives the actor system.
  runtime::spawn_anywhere(
    *r.cfg.sys, [idx, cb, weak = s->state()](caf::event_based_actor* self) {
      self
        ->request(idx, std::chrono::seconds{5}, indexer::subscribe_atom::value,
                  cb)
        .then([self](bool) { self->quit(); },
              [self, weak](caf::error&) {
                kv_stream::fail(
                  weak, {StatusCode::UNAVAILABLE, "the index did not answer"});
                self->quit();
              });
    });
  return s;
}

} // namespace outrider::sidecar
