// The migration loop's seams for one request: placement through the
// dispatch queue, engine streams on gRPC's callback API (cluster/engine),
// the prefill leg of conditional disaggregation, metrics. Nothing here
// blocks a thread: every step ends in a callback.
#include "actors/router/dispatch/dispatch_attempts.hpp"

#include <algorithm>
#include <unistd.h>

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include "actors/router/brain/decision_log.hpp"
#include "actors/router/dispatch/relay_mux_client.hpp"
#include "actors/router/dispatch/request_identity.hpp"
#include "cluster/engine/engine_adapter.hpp"
#include "cluster/engine/engine_call.hpp"
#include "openengine.grpc.pb.h"

namespace outrider::router {

namespace oe = openengine::v1;

namespace {

using clock_type = std::chrono::steady_clock;

double seconds(clock_type::duration d) {
  return std::chrono::duration<double>(d).count();
}

attempt_result outcome(const grpc::Status& st, bool cancelled) {
  if (cancelled)
    return {attempt_end::cancelled, {}};
  // A worker that died mid-stream is a reason to migrate, not an error
  // for the client.
  return {end_for_status(static_cast<int>(st.error_code()),
                         !st.ok() && engine::transport_broke(st)),
          st.error_message()};
}

class attempts final : public attempt_seams,
                       public std::enable_shared_from_this<attempts> {
 public:
  attempts(dispatch_parts& d, const generate_params& p)
    : d_(d), temperature_(p.temperature), lora_(p.lora),
      cache_salt_(p.cache_salt), media_(p.media), preprocess_(p.preprocess),
      deadline_(std::min(
        std::chrono::system_clock::now() + d.cfg.request_timeout,
        p.deadline.value_or(std::chrono::system_clock::time_point::max()))),
      trace_(trace::parse_traceparent(p.traceparent, p.tracestate)
               .value_or(trace::trace_context{})) {}

  bool may_migrate() const override { return !d_.shutting_down.load(); }

  void place(const std::shared_ptr<route_request>& req,
             std::function<void(route_decision)> done) override {
    auto tp = clock_type::now();
    // With disaggregation the request is decoded on a decode worker (any
    // decoding worker when there is no decode pool).
    req->role =
      d_.cfg.disagg ? std::optional{engine::worker_role::decode} : std::nullopt;
    req->identity = identity();
    auto self = shared_from_this();
    auto span = std::make_shared<trace::span>(
      child("router.placement", trace::span_kind::internal));
    dispatch_queue::placed_fn finish =
      [self, tp, span, done = std::move(done)](route_decision d) {
        // Tokenizing counts once, with the first placement.
        auto pre = std::exchange(self->preprocess_, {});
        self->d_.stats.overhead->observe(seconds(clock_type::now() - tp + pre));
        explain(*span, d);
        span->end();
        done(std::move(d));
      };
    d_.queue.place(req, true, [self, req, finish](route_decision d) {
      if (!d.ok && !d.busy && d.shed == shed_reason::none &&
          self->d_.cfg.disagg && req->role) {
        req->role.reset();
        return self->d_.queue.place(req, true, finish);
      }
      finish(std::move(d));
    });
  }

  void stream(const route_decision& d, const std::vector<uint32_t>& tokens,
              uint32_t max_tokens, int attempt, generate_outcome& out,
              const token_sink& on_tokens,
              std::function<void(attempt_result)> done) override {
    auto greq = request(tokens, max_tokens);
    if (!d_.cfg.disagg || !out.tokens.empty() || d.worker_id.empty())
      return launch(d, std::move(greq), attempt, out, on_tokens,
                    std::move(done));
    auto self = shared_from_this();
    d_.prefill.run(tokens, identity(), media_, d, trace_,
                   [self, d, greq, attempt, &out, &on_tokens,
                    done](std::optional<std::string> session) mutable {
                     if (session)
                       greq.mutable_kv()->mutable_session()->ParseFromString(
                         *session);
                     self->launch(d, std::move(greq), attempt, out, on_tokens,
                                  std::move(done));
                   });
  }

  void release(const route_decision& d) override {
    d_.queue.unbook(d.key, true);
  }

  void migrating(const route_decision& d,
                 const generate_outcome& out) override {
    d_.stats.migrations->inc();
    spdlog::warn("router: stream on {} broke after {} tokens; migrating",
                 d.worker_id, out.tokens.size());
  }

 private:
  class call;

  // A span of this request's, under the frontend's (not recorded when the
  // request is not traced; it still carries the client's context on).
  trace::span child(std::string name, trace::span_kind kind) const {
    return d_.cfg.tracer->start_child(std::move(name), trace_, kind);
  }

  // Why the placement went where it did, as span attributes.
  static void explain(trace::span& s, const route_decision& d) {
    if (!s.recording())
      return;
    if (!d.ok) {
      s.fail(d.shed != shed_reason::none ? "shed by flow control"
             : d.busy                    ? "every worker busy"
             : d.error.empty()           ? "no worker"
                                         : d.error);
      return;
    }
    s.set("outrider.worker_id", d.worker_id)
      .set("outrider.dp_rank", int64_t{d.rank})
      .set("outrider.overlap_blocks", int64_t{d.chosen_overlap_blocks})
      .set("outrider.best_overlap_blocks", int64_t{d.best_overlap_blocks})
      .set("outrider.prompt_blocks", int64_t{d.prompt_blocks})
      .set("outrider.cost", d.cost)
      .set("outrider.candidates", int64_t{d.candidates})
      .set("outrider.scored", int64_t{d.scored})
      .set("outrider.queued_prefill_tokens",
           static_cast<int64_t>(d.queued_prefill_tokens));
  }

  void launch(const route_decision& d, oe::GenerateRequest greq, int attempt,
              generate_outcome& out, const token_sink& on_tokens,
              std::function<void(attempt_result)> done);

  oe::GenerateRequest request(const std::vector<uint32_t>& tokens,
                              uint32_t max_tokens) {
    oe::GenerateRequest greq;
    // An id of our own, to abort the request on the engine in direct mode.
    greq.set_request_id("router-" + std::to_string(::getpid()) + "-" +
                        std::to_string(d_.next_id.fetch_add(1)));
    greq.mutable_token_ids()->mutable_ids()->Add(tokens.begin(), tokens.end());
    greq.mutable_stopping()->set_max_tokens(max_tokens);
    if (temperature_)
      greq.mutable_sampling()->set_temperature(*temperature_);
    set_identity(greq, lora_, cache_salt_, media_);
    return greq;
  }

  kv::prompt_identity identity() const {
    return prompt_identity_of(lora_, cache_salt_, media_);
  }

  bool deliver(const oe::GenerateResponse& resp, generate_outcome& out,
               const token_sink& on_tokens) {
    std::vector<uint32_t> chunk;
    chunk.reserve(static_cast<size_t>(resp.token().tokens_size()));
    for (const auto& t : resp.token().tokens())
      chunk.push_back(t.token_id());
    auto now = clock_type::now();
    if (out.tokens.empty()) {
      first_token_ = now;
      d_.stats.ttft->observe(seconds(now - t0_));
    } else
      d_.stats.itl->observe(seconds(now - last_token_));
    last_token_ = now;
    out.tokens.insert(out.tokens.end(), chunk.begin(), chunk.end());
    return on_tokens(chunk);
  }

  dispatch_parts& d_;
  std::optional<double> temperature_;
  std::string lora_;
  std::string cache_salt_;
  std::vector<generate_params::media_item> media_;
  std::chrono::nanoseconds preprocess_; // counted with the first placement
  std::chrono::system_clock::time_point deadline_; // of every engine call
  clock_type::time_point t0_ = clock_type::now();
  clock_type::time_point first_token_ = t0_;
  clock_type::time_point last_token_ = t0_;
  trace::trace_context trace_; // the frontend's span; invalid: none
};

// One engine call of one attempt: owns its gRPC context, is told of each
// response one at a time, and deletes itself when the call is done.
class attempts::call final : public engine::generate_sink {
 public:
  call(std::shared_ptr<attempts> owner, route_decision d,
       oe::GenerateRequest req, int attempt, generate_outcome& out,
       const token_sink& on_tokens, std::function<void(attempt_result)> done)
    : owner_(std::move(owner)), disp_(owner_->d_), d_(std::move(d)),
      req_(std::move(req)), attempt_(attempt), out_(out), on_tokens_(on_tokens),
      done_(std::move(done)) {}

  void start() {
    if (!disp_.calls.track(&ctx_))
      return end({attempt_end::cancelled, {}});
    ctx_.set_deadline(owner_->deadline_);
    // Through the worker's relay (OpenEngine), or straight to its engine
    // in whatever dialect the engine speaks.
    bool direct = disp_.cfg.direct;
    auto endpoint = direct ? d_.engine_endpoint : d_.endpoint;
    auto dialect =
      direct ? engine::dialect_of(d_.protocol) : engine::dialect::openengine;
    engine::call_target target;
    target.dp_rank = static_cast<uint32_t>(d_.rank);
    // A prompt mostly cached there goes ahead of the engine's queue
    // (placement decides): waiting behind cold prompts, its prefix would be
    // evicted before admission.
    if (d_.priority != 0)
      target.priority = d_.priority;
    target.hops = 1; // a router's call (routers refuse calls that passed one)
    if (!direct)
      target.worker = d_.worker_id; // the relay checks it serves this worker
    span_ = owner_->child("router.attempt", trace::span_kind::client);
    span_.set("outrider.attempt", int64_t{attempt_})
      .set("outrider.worker_id", d_.worker_id)
      .set("outrider.dp_rank", int64_t{d_.rank})
      .set("outrider.dispatch", direct                ? "direct"
                                : disp_.cfg.relay_mux ? "mux"
                                                      : "relay")
      .set("server.address", endpoint);
    if (const auto& tc = span_.context(); tc.valid()) {
      target.traceparent = trace::traceparent_of(tc);
      target.tracestate = tc.state;
    }
    // One stream per relay for all of this router's requests there; a
    // stream that ended (or began to drain) as it was handed out is
    // replaced once.
    for (int tries = 0; !direct && disp_.cfg.relay_mux && tries < 2 &&
                        !disp_.calls.mux_refused(endpoint);
         ++tries) {
      mux_ = disp_.calls.mux_for(endpoint, d_.worker_id);
      if (!mux_)
        return on_done({grpc::StatusCode::CANCELLED, "router shutting down"});
      if (mux_->start(req_, target, owner_->deadline_, *this, mux_id_))
        return; // `this` may be gone already
      if (mux_->end_code() == grpc::StatusCode::UNIMPLEMENTED)
        disp_.calls.mux_unsupported(endpoint); // Generate below
      else if (tries == 1)
        return on_done({grpc::StatusCode::UNAVAILABLE,
                        "relay mux stream ended as it was opened"});
      mux_.reset();
    }
    engine::start_generate(disp_.calls.channel_for(endpoint, !direct), dialect,
                           req_, target, ctx_, *this);
  }

  void on_response(oe::GenerateResponse&& resp, uint32_t) override {
    if (cancelled_)
      return;
    if (resp.has_token()) {
      if (!prefilled_) {
        prefilled_ = true;
        disp_.queue.unbook(d_.key, false);
        span_.event("first_token");
      }
      if (!owner_->deliver(resp, out_, on_tokens_)) {
        cancelled_ = true;
        if (mux_)
          mux_->cancel(mux_id_);
        else
          ctx_.TryCancel();
      }
      return;
    }
    if (resp.has_finished()) {
      out_.finish = resp.finished().reason() == oe::FINISH_REASON_STOP
                      ? engine::finish_reason::stop
                      : engine::finish_reason::length;
      if (attempt_ == 0 && resp.usage().has_cached_prompt_tokens())
        out_.cached_tokens = resp.usage().cached_prompt_tokens();
    }
  }

  void on_done(const grpc::Status& st) override {
    disp_.calls.untrack(&ctx_);
    if (mux_ && st.error_code() == grpc::StatusCode::UNIMPLEMENTED &&
        !prefilled_) {
      // A relay without the mux: this attempt again as a Generate stream.
      disp_.calls.mux_unsupported(d_.endpoint);
      mux_.reset();
      span_.fail("the relay does not serve RelayMux");
      span_.end();
      return start();
    }
    // A cancel of our own: the client went, or the router is shutting
    // down (cancel_all).
    bool cancelled =
      cancelled_ ||
      (disp_.calls.cut() && st.error_code() == grpc::StatusCode::CANCELLED);
    bool expired = st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
    if ((cancelled || expired) && disp_.cfg.direct)
      abort_on_engine();
    if (st.ok() && !cancelled && !out_.tokens.empty())
      remember();
    span_
      .set("outrider.output_tokens", static_cast<int64_t>(out_.tokens.size()))
      .set("rpc.grpc.status_code", static_cast<int64_t>(st.error_code()));
    if (cancelled)
      span_.fail("cancelled");
    else if (!st.ok())
      span_.fail(st.error_message());
    span_.end();
    end(outcome(st, cancelled));
  }

 private:
  void end(attempt_result r) {
    auto done = std::move(done_);
    delete this;
    done(std::move(r));
  }

  // For the status page's last minute.
  void remember() {
    const auto& o = *owner_;
    finished_request r;
    r.worker_id = d_.worker_id;
    r.ttft_s = seconds(o.first_token_ - o.t0_);
    r.output_tokens = out_.tokens.size();
    if (r.output_tokens > 1)
      r.itl_s = seconds(o.last_token_ - o.first_token_) /
                static_cast<double>(r.output_tokens - 1);
    r.prompt_tokens = static_cast<uint64_t>(req_.token_ids().ids_size());
    r.cached_tokens = out_.cached_tokens;
    if (attempt_ == 0)
      decision_log::served(d_, out_.cached_tokens);
    disp_.recent.record(std::move(r));
  }

  // Engines keep generating for a dropped stream: abort it (the relay does
  // this itself in relay mode). A blocking call: off gRPC's threads.
  void abort_on_engine() {
    disp_.calls.chore([d = d_, id = req_.request_id()] {
      auto err =
        engine::make_engine_adapter(d.protocol, d.engine_endpoint)->abort(id);
      if (err)
        spdlog::debug("router: abort on {}: {}", d.worker_id, describe(err));
    });
  }

  std::shared_ptr<attempts> owner_;
  dispatch_parts& disp_;
  route_decision d_;
  oe::GenerateRequest req_;
  int attempt_;
  generate_outcome& out_;
  const token_sink& on_tokens_;
  std::function<void(attempt_result)> done_;
  grpc::ClientContext ctx_;
  std::shared_ptr<mux_client> mux_; // --dispatch mux: the stream it is on
  uint64_t mux_id_ = 0;
  bool cancelled_ = false;
  bool prefilled_ = false;
  trace::span span_; // this engine call's
};

void attempts::launch(const route_decision& d, oe::GenerateRequest greq,
                      int attempt, generate_outcome& out,
                      const token_sink& on_tokens,
                      std::function<void(attempt_result)> done) {
  (new call(shared_from_this(), d, std::move(greq), attempt, out, on_tokens,
            std::move(done)))
    ->start();
}

} // namespace

std::shared_ptr<attempt_seams> make_attempts(dispatch_parts& parts,
                                             const generate_params& p) {
  return std::make_shared<attempts>(parts, p);
}

} // namespace outrider::router
