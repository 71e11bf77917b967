// Conditional disaggregation's first leg: a prefill worker computes the
// prompt (max_tokens 1) and hands back a KV session for the decode worker,
// on gRPC's callback API like every other engine call. With SGLang the
// router picks a bootstrap room instead and sends both legs at once.
#include "actors/router/dispatch/prefill_leg.hpp"

#include <random>

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include "actors/router/dispatch/request_identity.hpp"
#include "cluster/engine/engine_call.hpp"
#include "cluster/engine/sglang_translate.hpp"
#include "openengine.grpc.pb.h"

namespace outrider::router {

namespace oe = openengine::v1;

namespace {

// The prefill call: remembers the session, deletes itself when done.
class prefill_call final : public engine::generate_sink {
 public:
  using finished_fn =
    std::function<void(const grpc::Status&, std::optional<std::string>)>;
  prefill_call(std::function<void(grpc::ClientContext*)> untrack, finished_fn f)
    : untrack_(std::move(untrack)), finished_(std::move(f)) {
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::minutes{5});
  }

  void on_response(oe::GenerateResponse&& r, uint32_t) override {
    if (r.has_prefill_ready())
      session_ = r.prefill_ready().kv_session().SerializeAsString();
    // An engine that gave up on the leg (SGLang: no decode engine fetched
    // the KV) ends it as cancelled.
    if (r.has_finished() &&
        r.finished().reason() == oe::FINISH_REASON_CANCELLED)
      aborted_ = r.finished().message().empty() ? "the engine aborted it"
                                                : r.finished().message();
  }

  void on_done(const grpc::Status& st) override {
    untrack_(&ctx);
    auto f = std::move(finished_);
    auto session = std::move(session_);
    auto status = st.ok() && !aborted_.empty()
                    ? grpc::Status{grpc::StatusCode::ABORTED, aborted_}
                    : st;
    delete this;
    f(status, std::move(session));
  }

  grpc::ClientContext ctx;

 private:
  std::function<void(grpc::ClientContext*)> untrack_;
  finished_fn finished_;
  std::optional<std::string> session_;
  std::string aborted_;
};

} // namespace

void prefill_leg::run(const std::vector<uint32_t>& tokens,
                      const kv::prompt_identity& identity,
                      const std::vector<generate_params::media_item>& media,
                      const route_decision& d,
                      const trace::trace_context& trace, session_fn done) {
  auto preq = std::make_shared<route_request>();
  preq->tokens = tokens;
  preq->role = engine::worker_role::prefill;
  preq->identity = identity;
  queue_.place(
    preq, false, [this, preq, media, d, trace, done](route_decision p) {
      auto count = [this](const char* outcome) {
        stats_.disagg(outcome).inc();
      };
      auto plan =
        plan_prefill(*cfg_.disagg->get(), facts(preq->tokens.size(), d, p),
                     cfg_.queue_threshold);
      if (plan == prefill_plan::no_pool || plan == prefill_plan::incompatible ||
          plan == prefill_plan::local) {
        if (p.ok)
          queue_.unbook(p.key, true);
        count(to_string(plan));
        return done(std::nullopt);
      }
      bool bootstrap = plan == prefill_plan::bootstrap;
      oe::GenerateRequest req;
      req.mutable_token_ids()->mutable_ids()->Add(preq->tokens.begin(),
                                                  preq->tokens.end());
      req.mutable_stopping()->set_max_tokens(1);
      set_identity(req, preq->identity.lora, preq->identity.cache_salt, media);
      std::optional<std::string> room_session;
      if (bootstrap) {
        auto s = engine::bootstrap_session(new_bootstrap_room(),
                                           p.bootstrap_endpoint, p.rank);
        room_session = s.SerializeAsString();
        *req.mutable_kv()->mutable_session() = std::move(s);
      }
      // The leg's span, under the request's: the prefill worker's relay and
      // engine hang theirs under it.
      auto span = std::make_shared<trace::span>(cfg_.tracer->start_child(
        "router.prefill", trace, trace::span_kind::client));
      span->set("outrider.worker_id", p.worker_id)
        .set("outrider.dp_rank", int64_t{p.rank})
        .set("outrider.plan", to_string(plan))
        .set("outrider.prompt_tokens",
             static_cast<int64_t>(preq->tokens.size()));
      engine::call_target target{
        static_cast<uint32_t>(p.rank), std::nullopt, {}, 1};
      target.worker = p.worker_id; // the relay checks it serves this worker
      if (const auto& tc = span->context(); tc.valid()) {
        target.traceparent = trace::traceparent_of(tc);
        target.tracestate = tc.state;
      }
      auto* call = new prefill_call(
        [this](grpc::ClientContext* c) { calls_.untrack(c); },
        [this, p, count, done, bootstrap,
         span](const grpc::Status& st, std::optional<std::string> session) {
          if (!st.ok())
            span->fail(st.error_message());
          span->end();
          queue_.unbook(p.key, true);
          if (!st.ok() || (!session && !bootstrap)) {
            count("prefill_failed");
            spdlog::warn("router: remote prefill on {} failed ({}){}",
                         p.worker_id, st.error_message(),
                         bootstrap ? "" : "; prefilling locally");
            // The decode worker prefills it itself instead; with a bootstrap
            // room its decode leg fails on its own and is migrated.
            if (!bootstrap)
              done(std::nullopt);
            return;
          }
          count("remote_prefill");
          if (!bootstrap)
            done(std::move(session));
        });
      if (!calls_.track(&call->ctx)) {
        call->on_done({grpc::StatusCode::CANCELLED, "the router is stopping"});
        if (bootstrap)
          done(std::nullopt);
        return;
      }
      engine::start_generate(calls_.channel_for(p.endpoint, true),
                             engine::dialect::openengine, req, target,
                             call->ctx, *call);
      // SGLang's handoff: the decode leg goes at once, with the same room (the
      // prefill leg ends only once the decode engine has fetched the KV).
      if (bootstrap)
        done(std::move(room_session));
    });
}

prefill_facts prefill_facts_of(size_t prompt_tokens, const route_decision& d,
                               const route_decision& p) {
  prefill_facts f;
  f.prefill_placed = p.ok;
  f.prefill_bootstrap = !p.bootstrap_endpoint.empty();
  f.decode_sglang = engine::dialect_of(d.protocol) == engine::dialect::sglang &&
                    d.role == engine::worker_role::decode;
  f.load.isl = static_cast<uint32_t>(prompt_tokens);
  f.load.cached_on_decode = d.overlap_blocks * d.block_size;
  f.load.prefill_queue = static_cast<double>(p.queued_prefill_tokens);
  // What the decode engine reports, while fresh; else the router's books.
  bool engine = d.engine_used_kv_blocks >= 0;
  f.load.decode_blocks = engine ? static_cast<double>(d.engine_used_kv_blocks)
                                : static_cast<double>(d.held_decode_blocks);
  return f;
}

prefill_facts prefill_leg::facts(size_t prompt_tokens, const route_decision& d,
                                 const route_decision& p) {
  auto f = prefill_facts_of(prompt_tokens, d, p);
  // Where the decode load came from, counted where the policy is consulted.
  if (f.prefill_placed && !f.decode_sglang && !f.prefill_bootstrap)
    (d.engine_used_kv_blocks >= 0 ? stats_.decode_load_engine
                                  : stats_.decode_load_books)
      ->inc();
  return f;
}

// A random non-negative int64, as SGLang's bootstrap rooms are.
int64_t prefill_leg::new_bootstrap_room() {
  thread_local std::mt19937_64 gen{std::random_device{}()};
  return static_cast<int64_t>(gen() >> 1);
}

} // namespace outrider::router
