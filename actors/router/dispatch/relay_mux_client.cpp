#include "actors/router/dispatch/relay_mux_client.hpp"

#include <algorithm>
#include <vector>

#include "runtime/io_batch.hpp"

namespace outrider::router {

namespace oe = openengine::v1;
namespace mx = outrider::relaymux::v1;

std::shared_ptr<mux_client>
mux_client::open(const std::shared_ptr<grpc::Channel>& ch,
                 const std::string& worker) {
  std::shared_ptr<mux_client> c{new mux_client};
  c->self_ = c;
  if (!worker.empty())
    c->ctx_.AddMetadata(engine::worker_key, worker);
  c->stub_ = mx::RelayMux::NewStub(ch);
  c->stub_->async()->Relay(&c->ctx_, c.get());
  // Held until no write can start any more (`release_if_closed`): a write
  // started from another thread as the stream ends must find the call still
  // there, not past its OnDone.
  c->AddHold();
  c->StartRead(&c->in_);
  c->StartCall();
  return c;
}

bool mux_client::start(const oe::GenerateRequest& req,
                       const engine::call_target& target,
                       std::chrono::system_clock::time_point deadline,
                       engine::generate_sink& sink, uint64_t& id) {
  std::unique_lock<std::mutex> guard{mtx_};
  if (ended_.load() || draining_.load())
    return false;
  id = next_id_++;
  sinks_[id] = {&sink, deadline};
  auto* o = pending_.add_open();
  o->set_id(id);
  *o->mutable_request() = req;
  if (target.dp_rank)
    o->set_dp_rank(*target.dp_rank);
  if (target.priority)
    o->set_priority(*target.priority);
  o->set_hops(target.hops);
  o->set_traceparent(target.traceparent);
  o->set_tracestate(target.tracestate);
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
    deadline - std::chrono::system_clock::now());
  o->set_timeout_ms(static_cast<uint64_t>(std::max<int64_t>(1, left.count())));
  write_next(guard);
  return true;
}

void mux_client::cancel(uint64_t id) {
  std::unique_lock<std::mutex> guard{mtx_};
  if (!sinks_.count(id))
    return;
  pending_.add_cancel(id);
  write_next(guard);
}

void mux_client::expire(std::chrono::system_clock::time_point now) {
  std::lock_guard<std::mutex> deliver{deliver_mtx_};
  std::vector<engine::generate_sink*> late;
  {
    std::unique_lock<std::mutex> guard{mtx_};
    for (auto it = sinks_.begin(); it != sinks_.end();) {
      if (it->second.deadline > now) {
        ++it;
        continue;
      }
      late.push_back(it->second.sink);
      pending_.add_cancel(it->first);
      it = sinks_.erase(it);
    }
    if (!late.empty())
      write_next(guard);
  }
  for (auto* sink : late)
    sink->on_done({grpc::StatusCode::DEADLINE_EXCEEDED,
                   "deadline passed before the relay ended the request"});
}

void mux_client::write_next(std::unique_lock<std::mutex>& guard) {
  if (writing_ || closing_ ||
      (pending_.open_size() == 0 && pending_.cancel_size() == 0))
    return;
  writing_ = true;
  out_.Swap(&pending_);
  pending_.Clear();
  ++issuing_;
  guard.unlock();
  StartWrite(&out_);
  guard.lock();
  --issuing_;
  release_if_closed(guard);
}

void mux_client::release_if_closed(std::unique_lock<std::mutex>& guard) {
  bool release = closing_ && issuing_ == 0 && !released_;
  released_ = released_ || release;
  guard.unlock();
  if (release)
    RemoveHold(); // OnDone may come now
}

void mux_client::OnWriteDone(bool ok) {
  std::unique_lock<std::mutex> guard{mtx_};
  writing_ = false;
  if (ok) // else the stream broke: OnDone ends every request
    write_next(guard);
}

void mux_client::OnReadDone(bool ok) {
  if (!ok) {
    // The stream ended: no request starts on it and no write is started
    // any more; OnDone follows once a write being started is in flight.
    std::unique_lock<std::mutex> guard{mtx_};
    ended_ = true;
    closing_ = true;
    return release_if_closed(guard);
  }
  struct delivery {
    engine::generate_sink* sink;
    mx::Update* update;
  };
  if (in_.draining())
    draining_ = true; // new requests go on another stream
  std::lock_guard<std::mutex> deliver{deliver_mtx_};
  std::vector<delivery> found;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    for (auto& u : *in_.mutable_updates()) {
      auto it = sinks_.find(u.id());
      if (it == sinks_.end())
        continue; // not ours, or ended already
      found.push_back({it->second.sink, &u});
      if (u.done())
        sinks_.erase(it);
    }
  }
  // Outside the lock: a sink may cancel (or start another request) from
  // its callback. The streams' writes this step makes go to their I/O
  // threads together, one post a thread, when the batch ends.
  {
    runtime::io_batch batch;
    for (auto& [sink, u] : found) {
      for (auto& r : *u->mutable_responses()) {
        auto n =
          r.has_token() ? static_cast<uint32_t>(r.token().tokens_size()) : 0u;
        sink->on_response(std::move(r), n);
      }
      if (u->done()) {
        auto code = u->code();
        sink->on_done({code >= 0 && code <= 16
                         ? static_cast<grpc::StatusCode>(code)
                         : grpc::StatusCode::UNKNOWN,
                       u->message()});
      }
    }
  } // posted here, before the next read can deliver
  in_.Clear();
  StartRead(&in_);
}

void mux_client::OnDone(const grpc::Status& st) {
  std::unique_lock<std::mutex> deliver{deliver_mtx_};
  end_code_ = st.error_code();
  ended_ = true;
  std::unordered_map<uint64_t, open_request> open;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    open.swap(sinks_);
  }
  // The stream ended under requests still open: a cut of our own
  // (`cancel_all`) cancels them; anything else is a broken transport, a
  // reason to move them to another worker, as a broken Generate stream is.
  grpc::Status each =
    cancelled_.load()
      ? grpc::Status{grpc::StatusCode::CANCELLED, "cancelled by the router"}
    : st.error_code() == grpc::StatusCode::FAILED_PRECONDITION ||
        st.error_code() == grpc::StatusCode::UNIMPLEMENTED ||
        st.error_code() == grpc::StatusCode::UNAUTHENTICATED ||
        st.error_code() == grpc::StatusCode::PERMISSION_DENIED
      ? st
      : grpc::Status{
          grpc::StatusCode::UNAVAILABLE,
          "relay mux stream broke: " +
            (st.ok()
               ? std::string{"ended"}
               : "status " + std::to_string(static_cast<int>(st.error_code())) +
                   " " + st.error_message())};
  for (auto& [id, r] : open)
    r.sink->on_done(each);
  deliver.unlock();
  auto keep = std::move(self_); // this may go with `keep`
}

} // namespace outrider::router
