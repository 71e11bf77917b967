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

poll_round poll_round::of(size_t n, std::chrono::milliseconds every,
                          size_t max_per_second) {
  poll_round r;
  r.n = n;
  r.period = every;
  if (max_per_second > 0 && n > 0) {
    auto needed = std::chrono::milliseconds{(n * 1000 + max_per_second - 1) /
                                            max_per_second};
    r.period = std::max(every, needed);
  }
  return r;
}

std::chrono::milliseconds poll_round::due(size_t i) const {
  if (n == 0)
    return std::chrono::milliseconds{0};
  return std::chrono::milliseconds{
    static_cast<int64_t>(static_cast<uint64_t>(period.count()) * i / n)};
}

load_poller::load_poller(runtime::slot_ptr<kv_router_actor> router,
                         std::shared_ptr<grpc::ChannelCredentials> creds,
                         std::string tls_server_name,
                         std::chrono::milliseconds every, size_t max_per_second)
  : router_(std::move(router)), creds_(std::move(creds)),
    server_name_(std::move(tls_server_name)), every_(every),
    max_per_second_(max_per_second), thread_([this] { run(); }) {}

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
  using clock = std::chrono::steady_clock;
  // Waits until `t`; false once stopping.
  auto until = [this](std::unique_lock<std::mutex>& lock, clock::time_point t) {
    return !wake_.wait_until(lock, t, [this] { return stopping_; });
  };
  std::unique_lock<std::mutex> lock{mtx_};
  auto start = clock::now();
  auto round = poll_round::of(0, every_, max_per_second_);
  while (until(lock, start + round.period)) {
    start = clock::now();
    auto relays = relays_;
    round = poll_round::of(relays.size(), every_, max_per_second_);
    lock.unlock();
    std::erase_if(targets_, [&](const auto& t) {
      auto r = relays.find(t.first);
      return r == relays.end() || r->second != t.second->endpoint;
    });
    size_t i = 0;
    for (const auto& [id, endpoint] : relays) {
      // Calls due within 5 ms go together: a wake-up per call would cost
      // more than it spreads.
      auto due = start + round.due(i++);
      if (due - clock::now() > std::chrono::milliseconds{5}) {
        lock.lock();
        bool go_on = until(lock, due);
        lock.unlock();
        if (!go_on)
          return;
      }
      poll(id, endpoint, round.fresh_for());
    }
    lock.lock();
  }
}

void load_poller::poll(const std::string& id, const std::string& endpoint,
                       std::chrono::milliseconds fresh_for) {
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
    [call, t, id, fresh_for, router = router_,
     in_flight = in_flight_](grpc::Status st) {
      t->busy = false;
      if (st.ok() && call->resp.total_kv_blocks() > 0) {
        auto load = std::make_shared<engine_load>();
        load->worker_id = id;
        load->fresh_for = fresh_for;
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
