#include "actors/router/frontend/grpc_frontend.hpp"

#include <deque>
#include <mutex>

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include "actors/router/frontend/flow_identity.hpp"
#include "actors/router/frontend/grpc_request.hpp"
#include "actors/router/frontend/request_trace.hpp"
#include "cluster/engine/engine_call.hpp"
#include "cluster/engine/token_queue.hpp"
#include "cluster/grpc_server_limits.hpp"
#include "openengine.grpc.pb.h"

namespace outrider::router {

struct grpc_frontend::state {
  dispatcher& d;
  std::function<std::vector<std::string>()> models;
  grpc_frontend::limits lim;
  std::atomic<size_t> streams{0};
  runtime::counter* refused = &runtime::global_metrics().get_counter(
    "outrider_router_grpc_refused_total",
    "gRPC frontend requests refused: too many streams, shutting down, or "
    "a call that already passed a router");
  runtime::counter* loops = &runtime::global_metrics().get_counter(
    "outrider_router_loops_refused_total",
    "Calls refused because they already passed a router: a worker record "
    "names a router's address");
  runtime::counter* slow_readers = &runtime::global_metrics().get_counter(
    "outrider_router_grpc_slow_readers_total",
    "gRPC frontend streams ended because the client read nothing for the "
    "send timeout, or let too many tokens queue");
};

namespace {

using frontend_state = grpc_frontend::state;

namespace oe = openengine::v1;
using grpc::Status;
using grpc::StatusCode;

class refused final : public grpc::ServerWriteReactor<oe::GenerateResponse> {
 public:
  explicit refused(Status st) { Finish(std::move(st)); }
  void OnDone() override { delete this; }
};

// One Generate call: the server reactor towards the client and the
// dispatcher's token sink. It goes when both gRPC (OnDone) and the
// dispatcher (its outcome) are through with it.
class generate_call final
  : public grpc::ServerWriteReactor<oe::GenerateResponse> {
 public:
  generate_call(frontend_state& s, grpc::CallbackServerContext* ctx,
                const oe::GenerateRequest& in,
                std::optional<std::chrono::system_clock::time_point> deadline,
                flow_identity who, const engine::call_target& target)
    : s_(s), ctx_(ctx), id_(in.request_id()),
      trace_(*s.lim.tracer, target.traceparent, target.tracestate, "grpc",
             std::chrono::system_clock::now()) {
    ++s_.streams;
    generate_params p;
    p.prompt.assign(in.token_ids().ids().begin(), in.token_ids().ids().end());
    const auto& stop = in.stopping();
    p.max_tokens = stop.has_max_tokens() ? stop.max_tokens() : 16;
    if (in.sampling().has_temperature())
      p.temperature = in.sampling().temperature();
    p.lora = in.lora_name();
    p.cache_salt = in.kv().cache_salt();
    for (const auto& m : in.media())
      p.media.push_back({m.url(), m.uuid(), m.offset(), m.length()});
    p.deadline = deadline;
    p.flow = std::move(who.flow);
    p.band = who.band;
    p.session = std::move(who.session);
    trace_.describe(in.model(), true, p.prompt.size());
    trace_.hand_on(p);
    oe::GenerateResponse first;
    first.set_request_id(id_);
    first.mutable_prompt()->set_num_prompt_tokens(
      static_cast<uint32_t>(p.prompt.size()));
    {
      std::unique_lock<std::mutex> guard{mtx_};
      queue_.push_back(std::move(first));
      write_next(guard);
    }
    s_.d.generate(
      std::move(p),
      [this](const std::vector<uint32_t>& t) { return tokens(t); },
      [this](generate_outcome o) { generated(std::move(o)); });
  }

  void OnWriteDone(bool ok) override {
    std::unique_lock<std::mutex> guard{mtx_};
    writing_ = false;
    if (!ok) {
      gone_ = true;
      queue_.clear();
    }
    if (!queue_.empty())
      return write_next(guard);
    if (generated_)
      finish(guard);
  }

  void OnCancel() override {
    std::lock_guard<std::mutex> guard{mtx_};
    gone_ = true; // the dispatcher cancels at the next token
  }

  void OnDone() override { release(); }

 private:
  bool tokens(const std::vector<uint32_t>& toks) {
    std::unique_lock<std::mutex> guard{mtx_};
    if (gone_)
      return false;
    trace_.token();
    oe::GenerateResponse r;
    r.set_request_id(id_);
    auto* t = r.mutable_token();
    t->set_output_index(0);
    for (auto tok : toks)
      t->add_tokens()->set_token_id(tok);
    engine::enqueue_coalesced(queue_, std::move(r));
    queued_tokens_ += toks.size();
    write_next(guard);
    // A client that reads nothing: the engine must not generate for it,
    // nor the router hold its tokens without bound.
    auto stalled =
      writing_ &&
      std::chrono::steady_clock::now() - write_started_ > s_.lim.send_timeout;
    if (!stalled && queued_tokens_ * bytes_per_token <= s_.lim.max_queued_bytes)
      return true;
    gone_ = true;
    queue_.clear();
    status_ = Status{StatusCode::DEADLINE_EXCEEDED,
                     "the client read nothing for the send timeout, or let "
                     "too many tokens queue; the request was cancelled"};
    guard.unlock();
    s_.slow_readers->inc();
    ctx_->TryCancel(); // not under mtx_: OnCancel takes it
    return false;
  }

  void generated(generate_outcome o) {
    {
      std::unique_lock<std::mutex> guard{mtx_};
      generated_ = true;
      trace_.finish(o);
      if (!o.ok) {
        status_ = Status{code_for(o.kind), o.error};
      } else if (!gone_) {
        oe::GenerateResponse fin;
        fin.set_request_id(id_);
        fin.mutable_finished()->set_reason(
          o.finish == engine::finish_reason::stop ? oe::FINISH_REASON_STOP
                                                  : oe::FINISH_REASON_LENGTH);
        auto* u = fin.mutable_usage();
        auto completion = static_cast<uint32_t>(o.tokens.size());
        u->set_prompt_tokens(o.prompt_tokens);
        u->set_completion_tokens(completion);
        u->set_total_tokens(o.prompt_tokens + completion);
        u->set_cached_prompt_tokens(o.cached_tokens);
        queue_.push_back(std::move(fin));
      }
      if (!writing_ && !queue_.empty() && !gone_)
        write_next(guard);
      else if (!writing_)
        finish(guard);
    }
    release();
  }

  // Under mtx_: starts the next write unless one is in flight.
  void write_next(std::unique_lock<std::mutex>&) {
    if (writing_ || queue_.empty() || gone_)
      return;
    writing_ = true;
    write_started_ = std::chrono::steady_clock::now();
    current_ = std::move(queue_.front());
    queue_.pop_front();
    queued_tokens_ = 0;
    for (const auto& m : queue_)
      queued_tokens_ += static_cast<size_t>(m.token().tokens_size());
    StartWrite(&current_);
  }

  void finish(std::unique_lock<std::mutex>&) {
    if (finished_)
      return;
    finished_ = true;
    Finish(status_);
  }

  void release() {
    if (owners_.fetch_sub(1) == 1) {
      --s_.streams;
      delete this;
    }
  }

  // What a queued token costs in a message, about (its field tags and id).
  static constexpr size_t bytes_per_token = 8;

  frontend_state& s_;
  grpc::CallbackServerContext* ctx_;
  std::string id_;
  request_trace trace_;        // the dispatcher's callbacks, one at a time
  std::atomic<int> owners_{2}; // gRPC and the dispatcher
  std::mutex mtx_;
  std::deque<oe::GenerateResponse> queue_;              // guarded by mtx_
  oe::GenerateResponse current_;                        // being written
  bool writing_ = false;                                // guarded by mtx_
  bool gone_ = false;                                   // guarded by mtx_
  bool generated_ = false;                              // guarded by mtx_
  bool finished_ = false;                               // guarded by mtx_
  Status status_;                                       // guarded by mtx_
  size_t queued_tokens_ = 0;                            // guarded by mtx_
  std::chrono::steady_clock::time_point write_started_; // guarded by mtx_
};

class inference final : public oe::Inference::CallbackService {
 public:
  explicit inference(frontend_state& s) : s_(s) {}

  grpc::ServerWriteReactor<oe::GenerateResponse>*
  Generate(grpc::CallbackServerContext* ctx,
           const oe::GenerateRequest* in) override {
    if (s_.d.shutting_down()) {
      s_.refused->inc();
      return new refused(
        {StatusCode::UNAVAILABLE, "the router is shutting down"});
    }
    if (s_.streams.load() >= s_.lim.max_streams) {
      s_.refused->inc();
      return new refused({StatusCode::RESOURCE_EXHAUSTED,
                          "the router carries " +
                            std::to_string(s_.lim.max_streams) +
                            " streams already (--grpc-max-streams)"});
    }
    if (auto st = check_generate(*in, s_.models()); !st.ok())
      return new refused(std::move(st));
    // A call from a router (this one or another) means a worker record
    // names a router's listener instead of a relay: one refused hop, never
    // a chain of calls nested until the request timeout.
    std::string why;
    auto target = engine::call_target_of_call(ctx->client_metadata(), &why);
    if (!target)
      return new refused({StatusCode::INVALID_ARGUMENT, why});
    if (target->hops > 0) {
      s_.refused->inc();
      s_.loops->inc();
      return new refused(
        {StatusCode::UNAVAILABLE,
         "this call already passed a router (x-outrider-hops): a worker "
         "record names a router's address, not a sidecar's relay"});
    }
    // Flow control reads the same headers as over HTTP (gRPC metadata
    // keys are lower-case).
    std::map<std::string, std::string> headers;
    for (const auto& [k, v] : ctx->client_metadata())
      headers.emplace(std::string{k.data(), k.size()},
                      std::string{v.data(), v.size()});
    auto who =
      flow_identity_of(headers, s_.lim.objectives, s_.lim.session_header, &why);
    if (!who)
      return new refused({StatusCode::INVALID_ARGUMENT, why});
    auto deadline = ctx->deadline();
    return new generate_call(s_, ctx, *in,
                             deadline ==
                                 std::chrono::system_clock::time_point::max()
                               ? std::nullopt
                               : std::optional{deadline},
                             std::move(*who), *target);
  }

 private:
  frontend_state& s_;
};

} // namespace

grpc_frontend::grpc_frontend(dispatcher& d,
                             std::function<std::vector<std::string>()> models,
                             limits lim)
  : state_(new state{d, std::move(models), lim}),
    service_(std::make_unique<inference>(*state_)) {}

grpc_frontend::~grpc_frontend() {
  stop();
}

std::string
grpc_frontend::start(const std::string& host, uint16_t port,
                     std::shared_ptr<grpc::ServerCredentials> creds) {
  std::lock_guard<std::mutex> guard{mtx_};
  host_ = host;
  creds_ = std::move(creds);
  port_ = port;
  return listen();
}

std::string grpc_frontend::listen() {
  grpc::ServerBuilder builder;
  auto address = host_ + ":" + std::to_string(port_.load());
  builder.RegisterService(service_.get());
  if (auto err =
        server_.start(builder, address, creds_, state_->lim.server, "grpc");
      !err.empty())
    return "cannot listen on " + address + (": " + err);
  port_ = server_.port();
  return {};
}

bool grpc_frontend::restart(std::chrono::milliseconds grace) {
  std::lock_guard<std::mutex> guard{mtx_};
  if (stopped_ || port_ == 0)
    return false;
  server_.shutdown(std::chrono::system_clock::now() + grace);
  // A service serves one server in its life: a new one, the same state.
  service_ = std::make_unique<inference>(*state_);
  auto err = listen();
  if (!err.empty()) {
    spdlog::error("gRPC frontend: {} again yet", err);
    return false;
  }
  spdlog::warn("gRPC frontend: listening again on port {}", port_.load());
  return true;
}

void grpc_frontend::stop() {
  std::lock_guard<std::mutex> guard{mtx_};
  stopped_ = true;
  server_.shutdown(std::chrono::system_clock::now() + std::chrono::seconds{1});
}

} // namespace outrider::router
