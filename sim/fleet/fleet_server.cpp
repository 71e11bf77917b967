// The fleet's gRPC services, all on the callback API: a fleet of ten
// thousand workers has ten thousand KV streams open, and no thread per
// stream or per request.
#include "sim/fleet/fleet_server.hpp"

#include <algorithm>
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
    workers.push_back(std::make_unique<fleet_worker>(
      i, id, cfg.blocks_per_worker, cfg.block_size));
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
    out->set_running_requests(f_.running[w->index()].load());
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
  services.push_back(make_fleet_inference(fleet));
  if (fleet.cfg.relay_mux)
    services.push_back(make_fleet_mux(fleet));
  services.push_back(std::make_unique<control>(fleet));
  grpc::ServerBuilder b;
  b.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0); // as sim/main.cpp
  // gRPC writes each port chosen here at BuildAndStart: the vector is
  // sized first and not touched until then.
  fleet.ports.assign(std::max<uint32_t>(1, fleet.cfg.ports), 0);
  for (size_t i = 0; i < fleet.ports.size(); ++i)
    b.AddListeningPort(fleet.cfg.host + ":" +
                         std::to_string(i == 0 ? fleet.cfg.grpc_port : 0),
                       grpc::InsecureServerCredentials(), &fleet.ports[i]);
  for (auto& s : services)
    b.RegisterService(s.get());
  b.SetMaxReceiveMessageSize(64 << 20);
  auto server = b.BuildAndStart();
  if (!server || std::count(fleet.ports.begin(), fleet.ports.end(), 0) > 0) {
    *why = "cannot listen on " + fleet.cfg.host + ":" +
           std::to_string(fleet.cfg.grpc_port);
    return nullptr;
  }
  return server;
}

} // namespace outrider::sim
