// The fleet's gRPC services, all on the callback API: a fleet of ten
// thousand workers has ten thousand KV streams open, and no thread per
// stream or per request.
#include "sim/fleet/fleet_server.hpp"

#include <deque>

#include "cluster/engine/engine_call.hpp"
#include "cluster/kv/kv_proto.hpp"
#include "openengine.grpc.pb.h"

namespace outrider::sim {

namespace oe = openengine::v1;
using grpc::Status;
using grpc::StatusCode;

fleet_state::fleet_state(const fleet_config& c)
  : cfg(c), running(new std::atomic<uint32_t>[c.workers]) {
  workers.reserve(cfg.workers);
  for (uint32_t i = 0; i < cfg.workers; ++i) {
    auto id = cfg.worker_prefix + std::to_string(i);
    by_id.emplace(id, i);
    workers.push_back(std::make_unique<fleet_worker>(id, cfg.blocks_per_worker,
                                                     cfg.block_size));
    running[i] = 0;
  }
}

fleet_worker* fleet_state::worker_of(const grpc::ServerContextBase& ctx,
                                     std::string* why) {
  const auto& md = ctx.client_metadata();
  auto it = md.find(engine::worker_key);
  if (it == md.end()) {
    *why = "a fleet's calls must name their worker (x-outrider-worker)";
    return nullptr;
  }
  auto w = by_id.find(std::string(it->second.data(), it->second.size()));
  if (w == by_id.end()) {
    *why = "no such worker in this fleet";
    return nullptr;
  }
  return workers[w->second].get();
}

namespace {

// --- SubscribeKvEvents ------------------------------------------------------

constexpr size_t feed_capacity = 10000; // batches a slow reader may owe

class kv_feed;

// What the worker holds (weakly) and outlives the reactor.
struct feed_state final : fleet_sink {
  std::mutex mtx;
  kv_feed* feed = nullptr;           // guarded by mtx; null once gRPC is done
  std::deque<kv_response_ptr> queue; // guarded by mtx
  bool push(kv_response_ptr batch) override;
};

class kv_feed final : public grpc::ServerWriteReactor<kv_response> {
 public:
  explicit kv_feed(std::shared_ptr<feed_state> st) : st_(std::move(st)) {
    st_->feed = this;
  }

  // Under st_->mtx: the next write, or the end.
  void pump() {
    if (writing_ || finished_)
      return;
    if (ending_) {
      finished_ = true;
      return Finish(status_);
    }
    if (st_->queue.empty())
      return;
    current_ = std::move(st_->queue.front());
    st_->queue.pop_front();
    writing_ = true;
    StartWrite(current_.get());
  }

  // Under st_->mtx.
  void end(Status st) {
    status_ = std::move(st);
    ending_ = true;
    pump();
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> guard{st_->mtx};
    writing_ = false;
    if (!ok)
      ending_ = true;
    pump();
  }
  void OnCancel() override {
    std::lock_guard<std::mutex> guard{st_->mtx};
    ending_ = true;
    pump();
  }
  void OnDone() override {
    {
      std::lock_guard<std::mutex> guard{st_->mtx};
      st_->feed = nullptr;
      st_->queue.clear();
    }
    delete this;
  }

 private:
  std::shared_ptr<feed_state> st_;
  kv_response_ptr current_; // being written
  Status status_;
  bool writing_ = false, ending_ = false, finished_ = false;
};

bool feed_state::push(kv_response_ptr batch) {
  std::lock_guard<std::mutex> guard{mtx};
  if (!feed)
    return false;
  if (queue.size() >= feed_capacity) {
    // As a sidecar does: the reader resubscribes with a snapshot.
    feed->end({StatusCode::RESOURCE_EXHAUSTED,
               "subscriber too slow; resubscribe with a snapshot"});
    return false;
  }
  queue.push_back(std::move(batch));
  feed->pump();
  return true;
}

template <class Message>
class refusal final : public grpc::ServerWriteReactor<Message> {
 public:
  explicit refusal(Status st) { this->Finish(std::move(st)); }
  void OnDone() override { delete this; }
};

// --- Generate ----------------------------------------------------------------

class gen_call;

struct gen_state {
  std::mutex mtx;
  gen_call* call = nullptr; // guarded by mtx; null once gRPC is done
};

// One request on the shared engine core: the prompt's size, the first
// token after the uncached blocks' prefill time, then one token per
// `token_ms`, then the finish with usage.
class gen_call final : public grpc::ServerWriteReactor<oe::GenerateResponse> {
 public:
  gen_call(fleet_state& f, size_t worker, std::string id, uint32_t prompt,
           size_t hit_blocks, size_t full_blocks, uint32_t max_tokens)
    : f_(f), worker_(worker), id_(std::move(id)), prompt_(prompt),
      cached_(static_cast<uint32_t>(hit_blocks) * f.cfg.block_size),
      prefill_blocks_(full_blocks - hit_blocks), max_tokens_(max_tokens),
      st_(std::make_shared<gen_state>()) {
    st_->call = this;
    ++f_.running[worker_];
    std::lock_guard<std::mutex> guard{st_->mtx};
    oe::GenerateResponse r;
    r.set_request_id(id_);
    r.mutable_prompt()->set_num_prompt_tokens(prompt_);
    write(std::move(r));
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> guard{st_->mtx};
    writing_ = false;
    if (!ok || cancelled_)
      return finish({StatusCode::CANCELLED, "the client went away"});
    if (done_)
      return finish(Status::OK);
    double ms = sent_ == 0 ? f_.cfg.prefill_ms_per_block *
                               static_cast<double>(prefill_blocks_)
                           : f_.cfg.token_ms;
    if (ms <= 0 || sent_ >= max_tokens_)
      return next();
    waiting_ = true;
    auto when = fleet_timer::clock::now() +
                std::chrono::duration_cast<fleet_timer::clock::duration>(
                  std::chrono::duration<double, std::milli>(ms));
    f_.timer.at(when, [st = st_] {
      std::lock_guard<std::mutex> guard{st->mtx};
      if (st->call)
        st->call->resume();
    });
  }

  void OnCancel() override {
    std::lock_guard<std::mutex> guard{st_->mtx};
    cancelled_ = true;
    if (!writing_ && !waiting_)
      finish({StatusCode::CANCELLED, "the client went away"});
  }

  void OnDone() override {
    {
      std::lock_guard<std::mutex> guard{st_->mtx};
      st_->call = nullptr;
    }
    --f_.running[worker_];
    delete this;
  }

 private:
  // Under st_->mtx: the pause is over.
  void resume() {
    waiting_ = false;
    if (cancelled_)
      return finish({StatusCode::CANCELLED, "the client went away"});
    next();
  }

  // Under st_->mtx: the next token, or the finish.
  void next() {
    oe::GenerateResponse r;
    r.set_request_id(id_);
    if (sent_ < max_tokens_) {
      auto* t = r.mutable_token();
      t->set_output_index(0);
      // Any ids do: the fleet measures routing, not text.
      t->add_tokens()->set_token_id(1000 + (sent_ % 1000));
      ++sent_;
      ++f_.tokens;
    } else {
      r.mutable_finished()->set_reason(oe::FINISH_REASON_LENGTH);
      auto* u = r.mutable_usage();
      u->set_prompt_tokens(prompt_);
      u->set_completion_tokens(sent_);
      u->set_total_tokens(prompt_ + sent_);
      u->set_cached_prompt_tokens(cached_);
      done_ = true;
    }
    write(std::move(r));
  }

  void write(oe::GenerateResponse r) {
    current_ = std::move(r);
    writing_ = true;
    StartWrite(&current_);
  }

  void finish(Status st) {
    if (finished_)
      return;
    finished_ = true;
    Finish(std::move(st));
  }

  fleet_state& f_;
  size_t worker_;
  std::string id_;
  uint32_t prompt_, cached_;
  size_t prefill_blocks_;
  uint32_t max_tokens_, sent_ = 0;
  std::shared_ptr<gen_state> st_;
  oe::GenerateResponse current_;
  bool writing_ = false, waiting_ = false, cancelled_ = false, done_ = false,
       finished_ = false;
};

class inference final : public oe::Inference::CallbackService {
 public:
  explicit inference(fleet_state& f) : f_(f) {}

  grpc::ServerWriteReactor<oe::GenerateResponse>*
  Generate(grpc::CallbackServerContext* ctx,
           const oe::GenerateRequest* in) override {
    std::string why;
    auto* w = f_.worker_of(*ctx, &why);
    if (!w)
      return new refusal<oe::GenerateResponse>(
        {StatusCode::FAILED_PRECONDITION, why});
    if (!in->has_token_ids() || in->token_ids().ids_size() == 0)
      return new refusal<oe::GenerateResponse>(
        {StatusCode::INVALID_ARGUMENT, "send token_ids"});
    std::vector<uint32_t> prompt(in->token_ids().ids().begin(),
                                 in->token_ids().ids().end());
    size_t full = prompt.size() / f_.cfg.block_size;
    size_t hit = w->run(prompt);
    // At least one token is computed, as an engine does.
    if (hit * f_.cfg.block_size >= prompt.size() && hit > 0)
      --hit;
    ++f_.requests;
    f_.prompt_blocks += full;
    f_.cached_blocks += hit;
    uint32_t max = in->stopping().has_max_tokens()
                     ? std::max<uint32_t>(1, in->stopping().max_tokens())
                     : 16;
    auto id = in->request_id().empty()
                ? "fleet-" + std::to_string(f_.requests.load())
                : in->request_id();
    return new gen_call(f_, f_.by_id.at(w->id()), std::move(id),
                        static_cast<uint32_t>(prompt.size()), hit, full, max);
  }

 private:
  fleet_state& f_;
};

// --- Control -----------------------------------------------------------------

class control final : public oe::Control::CallbackService {
 public:
  explicit control(fleet_state& f) : f_(f) {}

  // The worker a unary call names; null after finishing `r` with the
  // refusal.
  fleet_worker* worker_or_refuse(grpc::CallbackServerContext* ctx,
                                 grpc::ServerUnaryReactor* r) {
    std::string why;
    auto* w = f_.worker_of(*ctx, &why);
    if (!w)
      r->Finish({StatusCode::FAILED_PRECONDITION, why});
    return w;
  }

  grpc::ServerUnaryReactor* GetServerInfo(grpc::CallbackServerContext* ctx,
                                          const oe::GetServerInfoRequest*,
                                          oe::ServerInfo* out) override {
    auto* r = ctx->DefaultReactor();
    auto* w = worker_or_refuse(ctx, r);
    if (!w)
      return r;
    out->set_engine_name("outrider-sim fleet");
    out->set_instance_id(w->id());
    out->set_engine_role(oe::ENGINE_ROLE_AGGREGATED);
    out->add_supported_models(f_.cfg.model);
    out->mutable_parallelism()->set_data_parallel_size(1);
    out->set_schema_revision(1);
    out->set_minimum_client_revision(1);
    out->set_schema_release("v1");
    out->mutable_capacity()->set_kv_block_size(f_.cfg.block_size);
    out->mutable_capacity()->set_total_kv_blocks(f_.cfg.blocks_per_worker);
    r->Finish(Status::OK);
    return r;
  }

  grpc::ServerUnaryReactor* GetLoad(grpc::CallbackServerContext* ctx,
                                    const oe::GetLoadRequest*,
                                    oe::LoadInfo* out) override {
    auto* r = ctx->DefaultReactor();
    auto* w = worker_or_refuse(ctx, r);
    if (!w)
      return r;
    out->set_instance_id(w->id());
    out->set_running_requests(f_.running[f_.by_id.at(w->id())].load());
    out->set_total_kv_blocks(f_.cfg.blocks_per_worker);
    r->Finish(Status::OK);
    return r;
  }

  grpc::ServerWriteReactor<kv_response>*
  SubscribeKvEvents(grpc::CallbackServerContext* ctx,
                    const oe::SubscribeKvEventsRequest*) override {
    std::string why;
    auto* w = f_.worker_of(*ctx, &why);
    if (!w)
      return new refusal<kv_response>({StatusCode::FAILED_PRECONDITION, why});
    // As a sidecar's stream with a snapshot starts (cluster/kv/kv_proto.hpp):
    // one snapshot batch, at the worker's position.
    ctx->AddInitialMetadata(kv::kv_epoch_key, "1");
    ctx->AddInitialMetadata(kv::kv_position_key, std::to_string(w->batches()));
    ctx->AddInitialMetadata(kv::kv_batches_key, "1");
    auto st = std::make_shared<feed_state>();
    auto* feed = new kv_feed(st);
    w->subscribe(st);
    return feed;
  }

 private:
  fleet_state& f_;
};

} // namespace

std::unique_ptr<grpc::Server>
start_fleet_server(fleet_state& fleet,
                   std::vector<std::unique_ptr<grpc::Service>>& services,
                   std::string* why) {
  services.push_back(std::make_unique<inference>(fleet));
  services.push_back(std::make_unique<control>(fleet));
  grpc::ServerBuilder b;
  int port = 0;
  b.AddListeningPort(fleet.cfg.host + ":" + std::to_string(fleet.cfg.grpc_port),
                     grpc::InsecureServerCredentials(), &port);
  for (auto& s : services)
    b.RegisterService(s.get());
  b.SetMaxReceiveMessageSize(64 << 20);
  auto server = b.BuildAndStart();
  if (!server || port == 0) {
    *why = "cannot listen on " + fleet.cfg.host + ":" +
           std::to_string(fleet.cfg.grpc_port);
    return nullptr;
  }
  return server;
}

} // namespace outrider::sim
