// The fleet's RelayMux.Relay (proto/relay_mux.proto): one stream from a
// router carries many requests of the worker it names, as a sidecar's relay
// serves it (actors/sidecar/relay_mux.cpp). Each request is paced on the
// fleet's timer as `Generate` paces it, independently of the stream's
// writes; what the requests produce while a write is in flight gathers into
// the stream's next message (one token per response, as the fleet's
// `Generate` sends them). A cancelled request ends at once. So a router in
// front of the fleet measures its default dispatch (`--dispatch mux`), not
// its fallback to a stream per request.

#include <memory>
#include <mutex>
#include <unordered_map>

#include "cluster/engine/mux_outbox.hpp"
#include "relay_mux.grpc.pb.h"
#include "sim/fleet/fleet_server.hpp"

namespace outrider::sim {

namespace {

namespace oe = openengine::v1;
namespace mx = outrider::relaymux::v1;
using grpc::Status;
using grpc::StatusCode;

class mux_stream;

// What the timer's callbacks hold: the stream while gRPC has it.
struct mux_state {
  std::mutex mtx;
  mux_stream* stream = nullptr; // guarded by mtx; null once gRPC is done
};

class mux_stream final
  : public grpc::ServerBidiReactor<mx::MuxRequest, mx::MuxResponse> {
 public:
  mux_stream(fleet_state& f, grpc::CallbackServerContext* ctx)
    : f_(f), st_(std::make_shared<mux_state>()) {
    st_->stream = this;
    std::string why;
    worker_ = f_.worker_of(*ctx, &why);
    std::lock_guard<std::mutex> guard{st_->mtx};
    if (!worker_) {
      finished_ = true;
      Finish({StatusCode::FAILED_PRECONDITION, why});
      return;
    }
    StartRead(&in_);
  }

  void OnReadDone(bool ok) override {
    std::lock_guard<std::mutex> guard{st_->mtx};
    if (!ok) { // the router closed its side or went
      reading_done_ = true;
      while (!jobs_.empty())
        stop(jobs_.begin()->first, {StatusCode::CANCELLED, "the router left"});
      return maybe_finish();
    }
    for (const auto& o : in_.open())
      open(o);
    for (auto id : in_.cancel())
      stop(id, {StatusCode::CANCELLED, "cancelled"});
    in_.Clear();
    StartRead(&in_);
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> guard{st_->mtx};
    writing_ = false;
    if (!ok) {
      gone_ = true;
      pending_.clear();
    }
    write_next();
    maybe_finish();
  }

  void OnCancel() override {
    std::lock_guard<std::mutex> guard{st_->mtx};
    gone_ = true; // the read fails next, and ends every request
  }

  void OnDone() override {
    {
      std::lock_guard<std::mutex> guard{st_->mtx};
      st_->stream = nullptr;
    }
    delete this;
  }

 private:
  // A request between its turns: it always waits on the timer then.
  struct job {
    fleet_generation g;
    uint64_t turn = 0; // the timer callback that may run it next
  };

  // Under st_->mtx.
  void open(const mx::Open& o) {
    auto id = o.id();
    if (jobs_.count(id))
      return end(id, {StatusCode::INVALID_ARGUMENT,
                      "request id " + std::to_string(id) +
                        " is already open on this stream"});
    Status refuse;
    auto g = fleet_generation::admit(f_, *worker_, o.request(), &refuse);
    if (!g)
      return end(id, refuse);
    ++f_.running[worker_->index()];
    jobs_.emplace(id, job{std::move(*g)});
    go_on(id, false);
  }

  // Under st_->mtx: request `id` goes on (`waited`: its pause is over):
  // its messages due now, then a pause on the timer, or its end.
  void go_on(uint64_t id, bool waited) {
    auto& j = jobs_.at(id);
    while (j.g.more()) {
      double ms = waited ? 0 : j.g.wait_ms(f_.cfg);
      waited = false;
      if (ms > 0) {
        j.turn = ++turns_;
        f_.timer.at(fleet_timer::clock::now() +
                      std::chrono::duration_cast<fleet_timer::clock::duration>(
                        std::chrono::duration<double, std::milli>(ms)),
                    [st = st_, id, turn = j.turn] {
                      std::lock_guard<std::mutex> guard{st->mtx};
                      if (st->stream)
                        st->stream->resume(id, turn);
                    });
        return write_next();
      }
      add(id, j.g.next(f_));
    }
    stop(id, Status::OK);
  }

  // Under st_->mtx: a pause is over, unless the request ended meanwhile
  // (its id may be open again, with other turns).
  void resume(uint64_t id, uint64_t turn) {
    auto it = jobs_.find(id);
    if (it != jobs_.end() && it->second.turn == turn)
      go_on(id, true);
  }

  // Under st_->mtx: request `id` ends with `st` (nothing when not open).
  void stop(uint64_t id, const Status& st) {
    auto it = jobs_.find(id);
    if (it == jobs_.end())
      return;
    --f_.running[it->second.g.worker()];
    jobs_.erase(it);
    end(id, st);
    maybe_finish();
  }

  // Under st_->mtx.
  void add(uint64_t id, oe::GenerateResponse r) {
    if (!gone_)
      *pending_.update_for(id).add_responses() = std::move(r);
  }

  void end(uint64_t id, const Status& st) {
    if (gone_)
      return;
    pending_.end(id, st);
    write_next();
  }

  // Under st_->mtx: a write of everything gathered, unless one is in flight.
  void write_next() {
    if (writing_ || gone_ || finished_ || pending_.empty())
      return;
    writing_ = true;
    pending_.take(out_);
    StartWrite(&out_);
  }

  // Under st_->mtx: reading is over, every request ended and its end was
  // written (or the router went): the answer.
  void maybe_finish() {
    if (finished_ || !reading_done_ || !jobs_.empty() || writing_ ||
        (!pending_.empty() && !gone_))
      return;
    finished_ = true;
    Finish(Status::OK);
  }

  fleet_state& f_;
  std::shared_ptr<mux_state> st_;
  fleet_worker* worker_ = nullptr;
  mx::MuxRequest in_;
  // All under st_->mtx:
  std::unordered_map<uint64_t, job> jobs_;
  uint64_t turns_ = 0;
  engine::mux_outbox pending_; // the next message
  mx::MuxResponse out_;        // the write in flight
  bool writing_ = false, reading_done_ = false, gone_ = false,
       finished_ = false;
};

class mux_service final : public mx::RelayMux::CallbackService {
 public:
  explicit mux_service(fleet_state& f) : f_(f) {}
  grpc::ServerBidiReactor<mx::MuxRequest, mx::MuxResponse>*
  Relay(grpc::CallbackServerContext* ctx) override {
    return new mux_stream(f_, ctx);
  }

 private:
  fleet_state& f_;
};

} // namespace

std::unique_ptr<grpc::Service> make_fleet_mux(fleet_state& fleet) {
  return std::make_unique<mux_service>(fleet);
}

} // namespace outrider::sim
