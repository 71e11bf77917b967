#include "actors/router/frontend/epp_stream.hpp"

#include <deque>
#include <mutex>

#include "actors/router/frontend/epp_flow.hpp"
#include "actors/router/frontend/epp_messages.hpp"

namespace outrider::router {

namespace pb = envoy::service::ext_proc::v3;
using epp_state = epp_server::state;

namespace {

// One gateway request: its ext_proc stream. What the stream's reactions
// and the asynchronous work (parse, placement) share lives in `flow`,
// under its mutex; the reactor goes when gRPC is done with it (OnDone),
// and work finishing later finds it gone.
class epp_stream final : public grpc::ServerBidiReactor<pb::ProcessingRequest,
                                                        pb::ProcessingResponse>,
                         public epp_flow::writer {
 public:
  explicit epp_stream(std::shared_ptr<epp_state> st)
    : flow_(std::make_shared<epp_flow>()) {
    flow_->st = std::move(st);
    flow_->reactor = this;
    StartRead(&in_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) { // the gateway half-closed, or the stream broke
      std::unique_lock lk(flow_->mtx);
      flow_->reading = false;
      flow_->release_booking();
      return settle(lk);
    }
    handle(in_);
    in_.Clear();
    {
      std::lock_guard lk(flow_->mtx);
      if (flow_->finished)
        return; // the read owed to gRPC is over: nothing more is read
    }
    StartRead(&in_);
  }

  void OnWriteDone(bool ok) override {
    std::unique_lock lk(flow_->mtx);
    flow_->writing = false;
    if (!ok) {
      flow_->broken = true;
      flow_->out.clear();
    }
    settle(lk);
  }

  void OnCancel() override {
    std::unique_lock lk(flow_->mtx);
    flow_->broken = true;
    flow_->out.clear();
    flow_->release_booking();
    settle(lk);
  }

  void OnDone() override {
    {
      std::lock_guard lk(flow_->mtx);
      flow_->reactor = nullptr;
      flow_->release_booking();
    }
    flow_->st->streams.fetch_sub(1);
    delete this;
  }

 private:
  // Starts the next write, or finishes once nothing is left to say and
  // the gateway is done; called with the lock held, releases it.
  void settle(std::unique_lock<std::mutex>& lk) override {
    auto& f = *flow_;
    if (f.finished || f.writing)
      return;
    if (!f.out.empty() && !f.broken) {
      f.writing = true;
      current_ = std::move(f.out.front());
      f.out.pop_front();
      lk.unlock();
      StartWrite(&current_);
      return;
    }
    if ((f.reading && !f.broken) || (f.picking && !f.broken))
      return;
    f.finished = true;
    lk.unlock();
    Finish(grpc::Status::OK);
  }

  void handle(const pb::ProcessingRequest& in) {
    std::unique_lock lk(flow_->mtx);
    auto& f = *flow_;
    bool answer = !in.async_mode();
    switch (in.request_case()) {
    case pb::ProcessingRequest::kRequestHeaders: {
      // A new request on this stream: whatever the last one held goes.
      f.release_booking();
      f.headers = epp::headers_of(in.request_headers().headers());
      f.subset = epp::subset_of(in.metadata_context());
      f.body.clear();
      f.chunks_owed = 0;
      f.prefilled = false;
      if (in.request_headers().end_of_stream()) {
        f.headers_owed = answer;
        f.body_owed = false;
        start_pick(flow_);
        return settle(lk);
      }
      f.body_owed = false;
      if (f.st->cfg.body_mode == epp_body_mode::streamed) {
        f.headers_owed = answer;
      } else if (answer) {
        // Buffered: Envoy sends the body only after this answer. The
        // reserved headers a client sent go now.
        pb::ProcessingResponse r;
        auto* c = r.mutable_request_headers()->mutable_response();
        for (const auto& name : epp::reserved_headers())
          c->mutable_header_mutation()->add_remove_headers(name);
        f.send(std::move(r));
      }
      break;
    }
    case pb::ProcessingRequest::kRequestBody: {
      const auto& b = in.request_body();
      if (f.body.size() + b.body().size() > f.st->cfg.max_body_bytes) {
        f.refuse(api_error(413,
                           "the request body is over " +
                             std::to_string(f.st->cfg.max_body_bytes) +
                             " bytes",
                           "body_too_large"),
                 "bad_request");
        break;
      }
      f.body += b.body();
      if (!b.end_of_stream()) {
        if (answer && f.headers_owed)
          ++f.chunks_owed;
        else if (answer)
          f.send(body_continue());
        break;
      }
      f.body_owed = answer;
      start_pick(flow_);
      return settle(lk);
    }
    case pb::ProcessingRequest::kResponseHeaders: {
      auto served = epp::served_of(in.metadata_context());
      if (!served.empty() && !f.picked.empty() && served != f.picked)
        f.st->served_elsewhere->inc();
      // The engine answers: its prompt is computed (streaming) or the
      // whole request is done; either way the prefill load goes.
      f.release_prefill();
      if (f.booking && !f.prefilled) {
        f.st->queue.unbook(*f.booking, false);
        f.prefilled = true;
      }
      if (in.response_headers().end_of_stream())
        f.release_booking();
      if (answer) {
        pb::ProcessingResponse r;
        r.mutable_response_headers();
        f.send(std::move(r));
      }
      break;
    }
    case pb::ProcessingRequest::kResponseBody: {
      if (in.response_body().end_of_stream())
        f.release_booking();
      if (answer) {
        pb::ProcessingResponse r;
        r.mutable_response_body();
        f.send(std::move(r));
      }
      break;
    }
    case pb::ProcessingRequest::kRequestTrailers:
      if (answer)
        f.send([] {
          pb::ProcessingResponse r;
          r.mutable_request_trailers();
          return r;
        }());
      break;
    case pb::ProcessingRequest::kResponseTrailers:
      f.release_booking();
      if (answer)
        f.send([] {
          pb::ProcessingResponse r;
          r.mutable_response_trailers();
          return r;
        }());
      break;
    default:
      break;
    }
    settle(lk);
  }

  std::shared_ptr<epp_flow> flow_;
  pb::ProcessingRequest in_;
  pb::ProcessingResponse current_;
};

} // namespace

grpc::ServerBidiReactor<pb::ProcessingRequest, pb::ProcessingResponse>*
new_epp_stream(std::shared_ptr<epp_state> st) {
  return new epp_stream(std::move(st));
}

} // namespace outrider::router
