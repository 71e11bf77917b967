// Conditional disaggregation's first leg: a prefill worker computes the
// prompt (max_tokens 1) and hands back a KV session for the decode worker,
// on gRPC's callback API like every other engine call.
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include "actors/router/dispatcher.hpp"
#include "cluster/engine/engine_call.hpp"
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
  }

  void on_done(const grpc::Status& st) override {
    untrack_(&ctx);
    auto f = std::move(finished_);
    auto session = std::move(session_);
    delete this;
    f(st, std::move(session));
  }

  grpc::ClientContext ctx;

 private:
  std::function<void(grpc::ClientContext*)> untrack_;
  finished_fn finished_;
  std::optional<std::string> session_;
};

} // namespace

void dispatcher::maybe_remote_prefill(const std::vector<uint32_t>& tokens,
                                      const route_decision& d,
                                      session_fn done) {
  auto preq = std::make_shared<route_request>();
  preq->tokens = tokens;
  preq->role = "prefill";
  place(preq, false, [this, preq, d, done](route_decision p) {
    auto count = [this](const char* outcome) { stats_.disagg(outcome).inc(); };
    if (!p.ok) {
      count("no_prefill_pool");
      return done(std::nullopt);
    }
    disagg_inputs in;
    in.isl = static_cast<uint32_t>(preq->tokens.size());
    in.cached_on_decode = d.overlap_blocks * d.block_size;
    in.prefill_queue = static_cast<double>(p.queued_prefill_tokens);
    // What the decode engine reports, while fresh; else the router's books.
    bool engine = d.engine_used_kv_blocks >= 0;
    in.decode_blocks = engine ? static_cast<double>(d.engine_used_kv_blocks)
                              : static_cast<double>(d.held_decode_blocks);
    (engine ? stats_.decode_load_engine : stats_.decode_load_books)->inc();
    if (decide(*disagg_, in, queue_threshold_) ==
        disagg_decision::local_prefill) {
      caf::anon_send(router_->get(), release_atom::value, p.key);
      count("local_prefill");
      return done(std::nullopt);
    }
    auto* call = new prefill_call(
      [this](grpc::ClientContext* c) { untrack(c); },
      [this, p, count, done](const grpc::Status& st,
                             std::optional<std::string> session) {
        caf::anon_send(router_->get(), release_atom::value, p.key);
        if (!st.ok() || !session) {
          // The decode worker prefills it itself instead.
          count("prefill_failed");
          spdlog::warn("router: remote prefill on {} failed ({}); "
                       "prefilling locally",
                       p.worker_id, st.error_message());
          return done(std::nullopt);
        }
        count("remote_prefill");
        done(std::move(session));
      });
    if (!track(&call->ctx)) {
      call->on_done({grpc::StatusCode::CANCELLED, "the router is stopping"});
      return;
    }
    oe::GenerateRequest req;
    req.mutable_token_ids()->mutable_ids()->Add(preq->tokens.begin(),
                                                preq->tokens.end());
    req.mutable_stopping()->set_max_tokens(1);
    engine::start_generate(
      channel_for(p.endpoint, true), engine::dialect::openengine, req,
      {{"openengine-target-dp-rank", std::to_string(p.rank)}}, call->ctx,
      *call);
  });
}

} // namespace outrider::router
