#include "actors/router/frontend/epp_stream.hpp"

#include <deque>
#include <mutex>

#include "actors/router/dispatch/prefill_leg.hpp"
#include "actors/router/frontend/epp_messages.hpp"

namespace outrider::router {

namespace pb = envoy::service::ext_proc::v3;
using clock_type = std::chrono::steady_clock;
using epp_state = epp_server::state;

namespace {

using epp_state = epp_server::state;

// One gateway request: its ext_proc stream. What the stream's reactions
// and the asynchronous work (parse, placement) share lives in `flow`,
// under its mutex; the reactor goes when gRPC is done with it (OnDone),
// and work finishing later finds it gone.
class epp_stream final
  : public grpc::ServerBidiReactor<pb::ProcessingRequest,
                                   pb::ProcessingResponse> {
 public:
  explicit epp_stream(std::shared_ptr<epp_state> st)
    : flow_(std::make_shared<shared>()) {
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
  struct shared {
    std::shared_ptr<epp_state> st;
    std::mutex mtx;
    epp_stream* reactor = nullptr; // null once gRPC is done with it
    std::deque<pb::ProcessingResponse> out;
    bool writing = false;
    bool reading = true;
    bool broken = false;
    bool finished = false;
    // The request being picked for.
    std::map<std::string, std::string> headers;
    std::optional<std::vector<std::string>> subset;
    std::string body;
    bool body_done = false;
    // Answers owed once the endpoint is known: the headers' (streamed, or
    // a request without a body) and the last body chunk's.
    bool headers_owed = false;
    bool body_owed = false;
    // Streamed: answers to earlier chunks, held until the headers' answer
    // has gone (answers go in the order of what they answer).
    size_t chunks_owed = 0;
    bool picking = false; // parse or placement in progress
    std::optional<uint64_t> booking;
    std::optional<uint64_t> prefill_booking; // P/D: the prefill worker's
    bool prefilled = false;
    std::string picked;

    // The prefill worker's part is over once the decode worker answers.
    void release_prefill() {
      if (prefill_booking)
        st->queue.unbook(*prefill_booking, true);
      prefill_booking.reset();
    }
    void release_booking() {
      release_prefill();
      if (booking)
        st->queue.unbook(*booking, true);
      booking.reset();
    }
  };

  // Starts the next write, or finishes once nothing is left to say and
  // the gateway is done; called with the lock held, releases it.
  void settle(std::unique_lock<std::mutex>& lk) {
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

  static void send(shared& f, pb::ProcessingResponse r) {
    f.out.push_back(std::move(r));
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
      f.body_done = false;
      f.prefilled = false;
      if (in.request_headers().end_of_stream()) {
        f.headers_owed = answer;
        f.body_owed = false;
        f.body_done = true;
        return begin_pick(lk);
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
        send(f, std::move(r));
      }
      break;
    }
    case pb::ProcessingRequest::kRequestBody: {
      const auto& b = in.request_body();
      if (f.body.size() + b.body().size() > f.st->cfg.max_body_bytes) {
        f.st->outcome("bad_request").inc();
        f.headers_owed = f.body_owed = false;
        f.chunks_owed = 0;
        send(f,
             epp::immediate(
               api_error(413,
                         "the request body is over " +
                           std::to_string(f.st->cfg.max_body_bytes) + " bytes",
                         "body_too_large"),
               "outrider_body_too_large"));
        break;
      }
      f.body += b.body();
      if (!b.end_of_stream()) {
        if (answer && f.headers_owed)
          ++f.chunks_owed;
        else if (answer)
          send(f, body_continue());
        break;
      }
      f.body_done = true;
      f.body_owed = answer;
      return begin_pick(lk);
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
        send(f, std::move(r));
      }
      break;
    }
    case pb::ProcessingRequest::kResponseBody: {
      if (in.response_body().end_of_stream())
        f.release_booking();
      if (answer) {
        pb::ProcessingResponse r;
        r.mutable_response_body();
        send(f, std::move(r));
      }
      break;
    }
    case pb::ProcessingRequest::kRequestTrailers:
      if (answer)
        send(f, [] {
          pb::ProcessingResponse r;
          r.mutable_request_trailers();
          return r;
        }());
      break;
    case pb::ProcessingRequest::kResponseTrailers:
      f.release_booking();
      if (answer)
        send(f, [] {
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

  static pb::ProcessingResponse body_continue() {
    pb::ProcessingResponse r;
    r.mutable_request_body();
    return r;
  }

  // The request is whole: parse and tokenize on the pool, then place.
  // Called with the lock held; releases it.
  void begin_pick(std::unique_lock<std::mutex>& lk) {
    auto& f = *flow_;
    f.picking = true;
    auto flow = flow_;
    auto t0 = clock_type::now();
    if (!f.st->pool.try_run([flow, t0] { pick(flow, t0); })) {
      f.picking = false;
      refuse(f,
             shed_response(shed_reason::saturated,
                           "too many prompts waiting to be tokenized"),
             "shed");
    }
    settle(lk);
  }

  // An immediate answer instead of the request (nothing is owed after it).
  static void refuse(shared& f, const runtime::http_response& r,
                     const std::string& outcome) {
    f.st->outcome(outcome).inc();
    f.headers_owed = f.body_owed = false;
    f.chunks_owed = 0;
    send(f, epp::immediate(r, "outrider_" + outcome));
  }

  // On the pool: what the request is, then where it goes.
  static void pick(const std::shared_ptr<shared>& flow,
                   clock_type::time_point t0) {
    std::map<std::string, std::string> headers;
    std::string body;
    std::optional<std::vector<std::string>> subset;
    {
      std::lock_guard lk(flow->mtx);
      if (!flow->reactor || flow->broken)
        return done_picking(flow);
      headers = flow->headers;
      body = std::move(flow->body);
      flow->body.clear();
      subset = flow->subset;
    }
    auto req = std::make_shared<route_request>();
    auto& st = *flow->st;
    if (auto bad = epp_route_request(st, headers, body, *req)) {
      std::unique_lock lk(flow->mtx);
      refuse(*flow, *bad, bad->status == 429 ? "shed" : "bad_request");
      return answered(flow, lk);
    }
    req->http_subset = std::move(subset);
    req->needs_http_endpoint = true;
    // With disaggregation a decode worker (any worker that decodes when
    // there is no decode pool), then maybe a prefill worker for it.
    if (st.cfg.disagg)
      req->role = engine::worker_role::decode;
    st.queue.place(req, true, [flow, t0, req](route_decision d) {
      auto& st = *flow->st;
      if (!d.ok && !d.busy && d.shed == shed_reason::none && req->role) {
        req->role.reset();
        return st.queue.place(req, true, [flow, t0](route_decision any) {
          placed(flow, t0, std::move(any), {});
        });
      }
      if (!d.ok || !st.cfg.disagg || d.role != engine::worker_role::decode)
        return placed(flow, t0, std::move(d), {});
      prefill_for(flow, t0, req, std::move(d));
    });
  }

  // P/D: a prefill worker for decode worker `d`, and the policy's word on
  // using it; the answer names it where the plan is to prefill remotely.
  static void prefill_for(const std::shared_ptr<shared>& flow,
                          clock_type::time_point t0,
                          const std::shared_ptr<route_request>& req,
                          route_decision d) {
    auto preq = std::make_shared<route_request>();
    preq->tokens = req->tokens;
    preq->identity = req->identity;
    preq->role = engine::worker_role::prefill;
    preq->needs_http_endpoint = true;
    auto& st = *flow->st;
    st.queue.place(preq, false, [flow, t0, preq, d](route_decision p) {
      auto& st = *flow->st;
      auto plan = plan_prefill(*st.cfg.disagg,
                               prefill_facts_of(preq->tokens.size(), d, p),
                               st.cfg.queue_threshold);
      // SGLang's bootstrap rooms have no header contract with a gateway:
      // such a decode worker prefills itself.
      bool remote = plan == prefill_plan::remote;
      runtime::global_metrics()
        .get_counter("outrider_router_disagg_decisions_total",
                     "Conditional disaggregation decisions, by outcome",
                     {{"outcome", remote ? "remote_prefill"
                                  : plan == prefill_plan::bootstrap
                                    ? "incompatible_prefill"
                                    : to_string(plan)}})
        .inc();
      if (!remote) {
        if (p.ok)
          st.queue.unbook(p.key, true);
        return placed(flow, t0, d, {});
      }
      placed(flow, t0, d, std::move(p));
    });
  }

  static void done_picking(const std::shared_ptr<shared>& flow) {
    std::unique_lock lk(flow->mtx);
    answered(flow, lk);
  }

  // Picking is over: write what is owed (or finish).
  static void answered(const std::shared_ptr<shared>& flow,
                       std::unique_lock<std::mutex>& lk) {
    flow->picking = false;
    if (flow->reactor)
      flow->reactor->settle(lk);
  }

  // Where the request goes (and, with P/D, where it is prefilled).
  static void placed(const std::shared_ptr<shared>& flow,
                     clock_type::time_point t0, route_decision d,
                     std::optional<route_decision> prefill) {
    std::unique_lock lk(flow->mtx);
    auto& f = *flow;
    if (!f.reactor || f.broken) {
      if (d.ok)
        f.st->queue.unbook(d.key, true);
      if (prefill)
        f.st->queue.unbook(prefill->key, true);
      return answered(flow, lk);
    }
    if (!d.ok) {
      if (d.shed != shed_reason::none)
        refuse(f, shed_response(d.shed, d.error), "shed");
      else
        refuse(f,
               api_error(503,
                         d.error.empty() ? "no endpoint can take the request"
                                         : d.error,
                         "no_worker", "server_error"),
               "no_endpoint");
      return answered(flow, lk);
    }
    f.booking = d.key;
    f.picked = d.http_endpoint;
    std::string prefiller;
    if (prefill) {
      f.prefill_booking = prefill->key;
      prefiller = prefill->http_endpoint;
    }
    f.st->outcome("picked").inc();
    f.st->decision->observe(
      std::chrono::duration<double>(clock_type::now() - t0).count());
    // The endpoint travels on the first answer owed; a later one continues.
    bool said = false;
    auto with_endpoint = [&](pb::ProcessingResponse& r, pb::CommonResponse* c) {
      if (said)
        return;
      *c = epp::picked(d.http_endpoint, prefiller);
      *r.mutable_dynamic_metadata() = epp::picked_metadata(d.http_endpoint);
      said = true;
    };
    if (f.headers_owed) {
      pb::ProcessingResponse r;
      with_endpoint(r, r.mutable_request_headers()->mutable_response());
      send(f, std::move(r));
    }
    for (; f.chunks_owed > 0; --f.chunks_owed)
      send(f, body_continue());
    if (f.body_owed) {
      pb::ProcessingResponse r;
      with_endpoint(r, r.mutable_request_body()->mutable_response());
      send(f, std::move(r));
    }
    f.headers_owed = f.body_owed = false;
    answered(flow, lk);
  }

  std::shared_ptr<shared> flow_;
  pb::ProcessingRequest in_;
  pb::ProcessingResponse current_;
};

} // namespace

grpc::ServerBidiReactor<pb::ProcessingRequest, pb::ProcessingResponse>*
new_epp_stream(std::shared_ptr<epp_state> st) {
  return new epp_stream(std::move(st));
}

} // namespace outrider::router
