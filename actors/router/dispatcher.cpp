#include "actors/router/dispatcher.hpp"

#include <chrono>
#include <thread>
#include <unistd.h>

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include "cluster/engine/engine_adapter.hpp"
#include "cluster/engine/engine_stream.hpp"
#include "openengine.grpc.pb.h"
#include "runtime/metrics.hpp"

namespace outrider::router {

namespace oe = openengine::v1;

namespace {

using clock_type = std::chrono::steady_clock;

double seconds(clock_type::duration d) {
  return std::chrono::duration<double>(d).count();
}

} // namespace

struct dispatcher::kv_session_ref {
  oe::KvSessionRef ref;
};

dispatcher::stats dispatcher::stats::make() {
  auto& m = runtime::global_metrics();
  stats s;
  s.ttft =
    &m.get_histogram("outrider_router_ttft_seconds", "Time to the first token",
                     runtime::metrics_registry::latency_bounds());
  s.itl = &m.get_histogram("outrider_router_inter_token_seconds",
                           "Time between streamed tokens",
                           runtime::metrics_registry::latency_bounds());
  s.overhead = &m.get_histogram(
    "outrider_router_overhead_seconds",
    "Router time per request: hashing, index lookup, selection",
    {0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.005});
  s.migrations = &m.get_counter("outrider_router_migrations_total",
                                "Streams moved to another worker");
  s.queue_depth =
    &m.get_gauge("outrider_router_queue_depth",
                 "Requests waiting for a worker below the queue threshold");
  for (const char* outcome :
       {"no_prefill_pool", "local_prefill", "prefill_failed", "remote_prefill"})
    s.disagg_outcomes[outcome] =
      &m.get_counter("outrider_router_disagg_decisions_total",
                     "Conditional disaggregation decisions, by outcome",
                     {{"outcome", outcome}});
  return s;
}

dispatcher::dispatcher(caf::actor_system& sys,
                       runtime::slot_ptr<kv_router_actor> router,
                       int migration_limit, std::optional<disagg_config> disagg,
                       std::optional<double> queue_threshold, bool direct)
  : sys_(sys), router_(std::move(router)), migration_limit_(migration_limit),
    disagg_(std::move(disagg)), queue_threshold_(queue_threshold),
    direct_(direct) {}

route_decision dispatcher::place(std::shared_ptr<route_request> req) {
  std::shared_ptr<const route_request> creq{std::move(req)};
  // While the supervisor restarts the router actor (it does not answer, or
  // it does not know the workers yet), wait a little rather than fail.
  auto deadline = clock_type::now() + std::chrono::seconds{3};
  caf::scoped_actor self{sys_};
  for (;;) {
    auto generation = router_->generation();
    route_decision d;
    bool down = false;
    self
      ->request(router_->get(), std::chrono::seconds{5}, place_atom::value,
                creq)
      .receive([&](route_decision& r) { d = std::move(r); },
               [&](caf::error& e) {
                 d.error = sys_.render(e);
                 down = true;
               });
    if (d.ok)
      placed_generation_ = generation;
    auto settled = placed_generation_.load();
    bool restarting =
      down || (!d.ok && !d.busy && settled != 0 && settled != generation);
    if (!restarting || clock_type::now() >= deadline)
      return d;
    std::this_thread::sleep_for(std::chrono::milliseconds{20});
  }
}

std::shared_ptr<dispatcher::kv_session_ref>
dispatcher::maybe_remote_prefill(const std::vector<uint32_t>& tokens,
                                 const route_decision& d) {
  auto count = [&](const char* outcome) { stats_.disagg(outcome).inc(); };
  auto preq = std::make_shared<route_request>();
  preq->tokens = tokens;
  preq->role = "prefill";
  auto p = place(preq);
  if (!p.ok) {
    count("no_prefill_pool");
    return nullptr;
  }
  disagg_inputs in;
  in.isl = static_cast<uint32_t>(tokens.size());
  in.cached_on_decode = d.overlap_blocks * d.block_size;
  in.prefill_queue = static_cast<double>(p.queued_prefill_tokens);
  in.decode_blocks = static_cast<double>(d.held_decode_blocks);
  auto decision = decide(*disagg_, in, queue_threshold_);
  if (decision == disagg_decision::local_prefill) {
    caf::anon_send(router_->get(), release_atom::value, p.key);
    count("local_prefill");
    return nullptr;
  }
  grpc::ClientContext ctx;
  ctx.AddMetadata("openengine-target-dp-rank", std::to_string(p.rank));
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes{5});
  oe::GenerateRequest req;
  req.mutable_token_ids()->mutable_ids()->Add(tokens.begin(), tokens.end());
  req.mutable_stopping()->set_max_tokens(1);
  auto stub = oe::Inference::NewStub(channel_for(p.endpoint));
  auto reader = stub->Generate(&ctx, req);
  oe::GenerateResponse resp;
  auto session = std::make_shared<kv_session_ref>();
  bool ready = false;
  while (reader->Read(&resp))
    if (resp.has_prefill_ready()) {
      session->ref = resp.prefill_ready().kv_session();
      ready = true;
    }
  auto st = reader->Finish();
  caf::anon_send(router_->get(), release_atom::value, p.key);
  if (!st.ok() || !ready) {
    // The decode worker prefills it itself instead.
    count("prefill_failed");
    spdlog::warn("router: remote prefill on {} failed ({}); prefilling "
                 "locally",
                 p.worker_id, st.error_message());
    return nullptr;
  }
  count("remote_prefill");
  return session;
}

std::shared_ptr<grpc::Channel>
dispatcher::channel_for(const std::string& endpoint) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto& ch = channels_[endpoint];
  if (!ch)
    ch = grpc::CreateChannel(endpoint, grpc::InsecureChannelCredentials());
  return ch;
}

// The dispatcher's side of the migration loop: placement through the
// router actor, streams through cluster/engine, metrics.
class dispatcher::attempts final : public attempt_seams {
 public:
  attempts(dispatcher& d, const generate_params& p) : d_(d), p_(p) {}

  bool may_migrate() const override { return !d_.shutting_down_.load(); }

  route_decision place(const std::shared_ptr<route_request>& req) override {
    auto tp = clock_type::now();
    // With disaggregation the request is decoded on a decode worker (any
    // decoding worker when there is no decode pool).
    req->role = d_.disagg_ ? "decode" : "";
    auto d = d_.place(req);
    if (!d.ok && !d.busy && d_.disagg_) {
      req->role.clear();
      d = d_.place(req);
    }
    if (d.busy) {
      // Every worker is busy: wait here rather than pile on (bounded).
      d_.stats_.queue_depth->add(1);
      for (int i = 0; i < 60000 && d.busy && !d_.shutting_down_.load(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds{5});
        d = d_.place(req);
      }
      d_.stats_.queue_depth->add(-1);
    }
    d_.stats_.overhead->observe(seconds(clock_type::now() - tp));
    return d;
  }

  attempt_result
  stream(const route_decision& d, const std::vector<uint32_t>& tokens,
         uint32_t max_tokens, int attempt, generate_outcome& out,
         const std::function<bool(const std::vector<uint32_t>&)>& on_tokens)
    override {
    auto greq = request(tokens, max_tokens);
    if (d_.disagg_ && out.tokens.empty() && !d.worker_id.empty()) {
      if (auto session = d_.maybe_remote_prefill(tokens, d))
        *greq.mutable_kv()->mutable_session() = session->ref;
    }
    // Through the worker's relay (OpenEngine), or straight to its engine in
    // whatever dialect the engine speaks.
    auto endpoint = d_.direct_ ? d.engine_endpoint : d.endpoint;
    auto dialect =
      d_.direct_ ? engine::dialect_of(d.protocol) : engine::dialect::openengine;
    grpc::ClientContext ctx;
    bool prefilled = false;
    auto result = engine::stream_generate(
      *d_.channel_for(endpoint), dialect, greq,
      {{"openengine-target-dp-rank", std::to_string(d.rank)}}, ctx,
      [&](const oe::GenerateResponse& resp, uint32_t) {
        if (resp.has_token()) {
          if (!prefilled) {
            prefilled = true;
            caf::anon_send(d_.router_->get(), prefilled_atom::value, d.key);
          }
          return deliver(resp, out, on_tokens);
        }
        if (resp.has_finished()) {
          out.finish_reason = resp.finished().reason() == oe::FINISH_REASON_STOP
                                ? "stop"
                                : "length";
          if (attempt == 0 && resp.usage().has_cached_prompt_tokens())
            out.cached_tokens = resp.usage().cached_prompt_tokens();
        }
        return true;
      });
    if (result.cancelled && d_.direct_)
      abort_on_engine(d, greq.request_id());
    return outcome(result);
  }

  void release(const route_decision& d) override {
    caf::anon_send(d_.router_->get(), release_atom::value, d.key);
  }

  void migrating(const route_decision& d,
                 const generate_outcome& out) override {
    d_.stats_.migrations->inc();
    spdlog::warn("router: stream on {} broke after {} tokens; migrating",
                 d.worker_id, out.tokens.size());
  }

 private:
  oe::GenerateRequest request(const std::vector<uint32_t>& tokens,
                              uint32_t max_tokens) {
    oe::GenerateRequest greq;
    // An id of our own, to abort the request on the engine in direct mode.
    greq.set_request_id("router-" + std::to_string(::getpid()) + "-" +
                        std::to_string(d_.next_id_.fetch_add(1)));
    greq.mutable_token_ids()->mutable_ids()->Add(tokens.begin(), tokens.end());
    greq.mutable_stopping()->set_max_tokens(max_tokens);
    if (p_.temperature)
      greq.mutable_sampling()->set_temperature(*p_.temperature);
    return greq;
  }

  bool
  deliver(const oe::GenerateResponse& resp, generate_outcome& out,
          const std::function<bool(const std::vector<uint32_t>&)>& on_tokens) {
    std::vector<uint32_t> chunk;
    for (const auto& t : resp.token().tokens())
      chunk.push_back(t.token_id());
    auto now = clock_type::now();
    if (out.tokens.empty())
      d_.stats_.ttft->observe(seconds(now - t0_));
    else
      d_.stats_.itl->observe(seconds(now - last_token_));
    last_token_ = now;
    out.tokens.insert(out.tokens.end(), chunk.begin(), chunk.end());
    return on_tokens(chunk);
  }

  // Engines keep generating for a dropped stream: abort it (the relay does
  // this itself in relay mode).
  void abort_on_engine(const route_decision& d, const std::string& id) {
    auto err =
      engine::make_engine_adapter(d.protocol, d.engine_endpoint)->abort(id);
    if (err)
      spdlog::debug("router: abort on {}: {}", d.worker_id, describe(err));
  }

  static attempt_result outcome(const engine::stream_outcome& r) {
    if (r.cancelled)
      return {attempt_end::cancelled, {}};
    const auto& st = r.status;
    if (st.ok())
      return {attempt_end::finished, {}};
    auto code = st.error_code();
    return {code == grpc::StatusCode::UNAVAILABLE ? attempt_end::unavailable
            : code == grpc::StatusCode::INVALID_ARGUMENT ? attempt_end::invalid
                                                         : attempt_end::failed,
            st.error_message()};
  }

  dispatcher& d_;
  const generate_params& p_;
  clock_type::time_point t0_ = clock_type::now();
  clock_type::time_point last_token_ = t0_;
};

generate_outcome dispatcher::generate(
  const generate_params& p,
  const std::function<bool(const std::vector<uint32_t>&)>& on_tokens) {
  attempts seams{*this, p};
  return run_with_migration(p, migration_limit_, seams, on_tokens);
}

} // namespace outrider::router
