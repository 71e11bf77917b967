#include "actors/router/watch/load_poller.hpp"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include "cluster/engine/engine_call.hpp"
#include "cluster/tls.hpp"
#include "openengine.grpc.pb.h"

namespace outrider::router {

namespace oe = openengine::v1;

struct load_poller::target {
  std::string endpoint;
  std::unique_ptr<oe::Control::Stub> stub;
  std::atomic<bool> busy{false}; // a call is out: skip this round
};

namespace {

// One GetLoad call; deletes itself when gRPC is done with it.
struct load_call {
  grpc::ClientContext ctx;
  oe::GetLoadRequest req;
  oe::LoadInfo resp;
};

} // namespace

load_poller::load_poller(runtime::slot_ptr<kv_router_actor> router,
                         std::shared_ptr<grpc::ChannelCredentials> creds,
                         std::string tls_server_name,
                         std::chrono::milliseconds every)
  : router_(std::move(router)), creds_(std::move(creds)),
    server_name_(std::move(tls_server_name)), every_(every),
    thread_([this] { run(); }) {}

load_poller::~load_poller() {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
  // Calls still out end by their deadline; wait for them (bounded).
  for (int i = 0; i < 200 && in_flight_->load() > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds{10});
}

void load_poller::set_workers(std::map<std::string, std::string> relays) {
  std::lock_guard<std::mutex> guard{mtx_};
  relays_ = std::move(relays);
}

void load_poller::run() {
  std::unique_lock<std::mutex> lock{mtx_};
  while (!wake_.wait_for(lock, every_, [this] { return stopping_; })) {
    auto relays = relays_;
    lock.unlock();
    std::erase_if(targets_, [&](const auto& t) {
      auto r = relays.find(t.first);
      return r == relays.end() || r->second != t.second->endpoint;
    });
    for (const auto& [id, endpoint] : relays)
      poll(id, endpoint);
    lock.lock();
  }
}

void load_poller::poll(const std::string& id, const std::string& endpoint) {
  auto& t = targets_[id];
  if (!t) {
    t = std::make_shared<target>();
    t->endpoint = endpoint;
    t->stub = oe::Control::NewStub(
      cluster::relay_channel(endpoint, creds_, server_name_));
  }
  if (t->busy.exchange(true))
    return;
  auto* call = new load_call;
  call->ctx.set_deadline(std::chrono::system_clock::now() + every_);
  call->ctx.AddMetadata(engine::worker_key, id); // the relay checks it
  call->req.set_include_per_rank(true);
  ++*in_flight_;
  t->stub->async()->GetLoad(
    &call->ctx, &call->req, &call->resp,
    [call, t, id, router = router_, in_flight = in_flight_](grpc::Status st) {
      t->busy = false;
      if (st.ok() && call->resp.total_kv_blocks() > 0) {
        auto load = std::make_shared<engine_load>();
        load->worker_id = id;
        for (const auto& r : call->resp.ranks())
          load->ranks.push_back({static_cast<int>(r.data_parallel_rank()),
                                 r.used_kv_blocks(), r.total_kv_blocks()});
        if (load->ranks.empty()) // one rank, reported as a whole
          load->ranks.push_back(
            {0, call->resp.used_kv_blocks(), call->resp.total_kv_blocks()});
        caf::anon_send(router->get(), engine_load_atom::value,
                       std::shared_ptr<const engine_load>{std::move(load)});
      } else if (!st.ok()) {
        spdlog::debug("router: GetLoad from {}: {}", id, st.error_message());
      }
      delete call;
      --*in_flight;
    });
}

} // namespace outrider::router
