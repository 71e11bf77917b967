#include "actors/router/worker_watcher.hpp"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include "cluster/kv/kv_proto.hpp"
#include "cluster/tls.hpp"
#include "openengine.grpc.pb.h"
#include "runtime/metrics.hpp"

namespace outrider::router {

namespace oe = openengine::v1;

struct worker_watcher::subscription {
  std::string worker_id;
  std::atomic<bool> stopping{false};
  std::mutex mtx;
  std::shared_ptr<grpc::ClientContext> call; // guarded by mtx
  std::thread thread;

  void stop() {
    stopping = true;
    {
      std::lock_guard<std::mutex> guard{mtx};
      if (call)
        call->TryCancel();
    }
    if (thread.joinable())
      thread.join();
  }

  void run(std::string endpoint, runtime::slot_ptr<kv_router_actor> router,
           std::shared_ptr<grpc::ChannelCredentials> creds,
           std::string server_name) {
    auto channel = cluster::relay_channel(endpoint, creds, server_name);
    auto stub = oe::Control::NewStub(channel);
    auto& bad = runtime::global_metrics().get_counter(
      "outrider_router_events_rejected_total",
      "Malformed KV events from sidecars");
    while (!stopping) {
      auto ctx = std::make_shared<grpc::ClientContext>();
      {
        std::lock_guard<std::mutex> guard{mtx};
        if (stopping)
          return;
        call = ctx;
      }
      oe::SubscribeKvEventsRequest req;
      req.set_include_snapshot(true);
      auto reader = stub->SubscribeKvEvents(ctx.get(), req);
      oe::SubscribeKvEventsResponse resp;
      std::set<int> seen; // the first batch of a rank is its snapshot
      while (reader->Read(&resp)) {
        if (resp.has_error()) {
          spdlog::warn("router: {} event plane: {}", worker_id,
                       resp.error().message());
          break;
        }
        auto ev = std::make_shared<worker_events>();
        ev->worker_id = worker_id;
        ev->rank = static_cast<int>(resp.batch().data_parallel_rank());
        ev->reset = seen.insert(ev->rank).second;
        for (const auto& e : resp.batch().events()) {
          if (auto k = kv::from_proto(e))
            ev->events.push_back(std::move(*k));
          else
            bad.inc();
        }
        caf::anon_send(router->get(), kv_events_atom::value,
                       std::shared_ptr<const worker_events>{std::move(ev)});
      }
      reader->Finish();
      // Bounded by `stopping`; a short pause before resubscribing.
      for (int i = 0; i < 5 && !stopping; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds{40});
    }
  }
};

worker_watcher::worker_watcher(std::shared_ptr<cluster::discovery> disc,
                               runtime::slot_ptr<kv_router_actor> router,
                               std::shared_ptr<grpc::ChannelCredentials> creds,
                               std::shared_ptr<cluster::nats_kv_plane> plane,
                               std::string tls_server_name)
  : disc_(std::move(disc)), router_(std::move(router)),
    creds_(std::move(creds)), server_name_(std::move(tls_server_name)),
    plane_(std::move(plane)),
    poller_(std::make_unique<load_poller>(router_, creds_, server_name_)) {
  if (plane_) {
    plane_connections_ = plane_->connections();
    auto err = plane_->subscribe([this](cluster::kv_plane_message m) {
      std::lock_guard<std::mutex> guard{followers_mtx_};
      if (auto f = followers_.find(m.worker_id); f != followers_.end())
        f->second->on_message(std::move(m));
    });
    if (err)
      spdlog::error("router: {}", describe(err));
  }
  thread_ = std::thread([this] { run(); });
}

void worker_watcher::follow(const cluster::worker_record& r) {
  if (plane_) {
    auto f = std::make_unique<kv_follower>(r, router_, creds_, server_name_);
    std::unique_ptr<kv_follower> old;
    {
      std::lock_guard<std::mutex> guard{followers_mtx_};
      old = std::exchange(followers_[r.worker_id], std::move(f));
    }
    return; // `old` stops outside the lock
  }
  auto sub = std::make_unique<subscription>();
  sub->worker_id = r.worker_id;
  auto* raw = sub.get();
  sub->thread =
    std::thread([raw, ep = r.relay_endpoint, rt = router_, creds = creds_,
                 name = server_name_] { raw->run(ep, rt, creds, name); });
  subs_[r.worker_id] = std::move(sub);
}

void worker_watcher::unfollow(const std::string& worker_id) {
  std::unique_ptr<kv_follower> old;
  {
    std::lock_guard<std::mutex> guard{followers_mtx_};
    if (auto f = followers_.find(worker_id); f != followers_.end()) {
      old = std::move(f->second);
      followers_.erase(f);
    }
  }
  if (auto s = subs_.find(worker_id); s != subs_.end()) {
    s->second->stop();
    subs_.erase(s);
  }
}

worker_watcher::~worker_watcher() {
  stopping_ = true;
  if (thread_.joinable())
    thread_.join();
  poller_.reset();
  for (auto& [id, s] : subs_)
    s->stop();
  std::map<std::string, std::unique_ptr<kv_follower>> followers;
  {
    std::lock_guard<std::mutex> guard{followers_mtx_};
    followers.swap(followers_);
  }
}

void worker_watcher::run() {
  auto* files = dynamic_cast<cluster::file_discovery*>(disc_.get());
  auto* nats = dynamic_cast<cluster::nats_discovery*>(disc_.get());
  auto& invalid_records = runtime::global_metrics().get_counter(
    "outrider_discovery_invalid_records_total",
    "Malformed worker records skipped");
  while (!stopping_) {
    if (!router_->get()) {
      // The supervisor has not started the router actor yet.
      std::this_thread::sleep_for(std::chrono::milliseconds{5});
      continue;
    }
    if (auto g = router_->generation(); g != generation_) {
      // A new router actor knows nothing: tell it everything again.
      if (generation_ != 0)
        spdlog::info("router: the router actor restarted; rebuilding its "
                     "worker set and index from {} worker(s)",
                     known_.size());
      generation_ = g;
      for (const auto& [id, r] : known_)
        unfollow(id);
      known_.clear();
    }
    if (plane_ && plane_->connections() != plane_connections_) {
      // Reconnected to NATS: what was published meanwhile is lost.
      plane_connections_ = plane_->connections();
      std::lock_guard<std::mutex> guard{followers_mtx_};
      for (auto& [id, f] : followers_)
        f->resync("reconnect");
    }
    size_t invalid = 0;
    auto records = disc_->list(&invalid);
    invalid_records.inc(invalid);
    std::map<std::string, cluster::worker_record> now;
    for (auto& r : records)
      now[r.worker_id] = r;
    for (const auto& [id, r] : known_) {
      auto i = now.find(id);
      if (i != now.end() && i->second.instance_id == r.instance_id &&
          i->second.relay_endpoint == r.relay_endpoint)
        continue;
      // Gone, or replaced by another engine instance.
      caf::anon_send(router_->get(), worker_down_atom::value, id);
      unfollow(id);
    }
    for (const auto& [id, r] : now) {
      auto k = known_.find(id);
      if (k != known_.end() && k->second.instance_id == r.instance_id &&
          k->second.relay_endpoint == r.relay_endpoint)
        continue;
      caf::anon_send(router_->get(), worker_up_atom::value, r);
      follow(r);
    }
    known_ = std::move(now);
    std::map<std::string, std::string> relays;
    for (const auto& [id, r] : known_)
      relays[id] = r.relay_endpoint;
    poller_->set_workers(std::move(relays));
    if (files)
      files->wait_for_change(std::chrono::milliseconds{500});
    else if (nats)
      nats->wait_for_change(std::chrono::milliseconds{500});
    else
      std::this_thread::sleep_for(std::chrono::milliseconds{200});
  }
}

} // namespace outrider::router
