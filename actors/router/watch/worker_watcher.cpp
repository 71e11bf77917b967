#include "actors/router/watch/worker_watcher.hpp"

#include <algorithm>
#include <ctime>
#include <set>

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include "cluster/tls.hpp"
#include "runtime/metrics.hpp"

namespace outrider::router {

namespace {

// "host:port" with the names of this machine's loopback and wildcard
// addresses written one way, so that a record naming this router by any
// of them is seen as naming it. (Other names of this host are caught one
// hop later: routers refuse calls that passed a router.)
std::string same_host_form(const std::string& endpoint) {
  auto colon = endpoint.rfind(':');
  if (colon == std::string::npos)
    return endpoint;
  auto host = endpoint.substr(0, colon);
  for (const char* local :
       {"localhost", "0.0.0.0", "::", "[::]", "::1", "[::1]", "127.0.0.1"})
    if (host == local)
      host = "local";
  return host + endpoint.substr(colon);
}

std::chrono::nanoseconds thread_cpu() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return std::chrono::seconds{t.tv_sec} + std::chrono::nanoseconds{t.tv_nsec};
}

} // namespace

worker_watcher::worker_watcher(std::shared_ptr<cluster::discovery> disc,
                               runtime::slot_ptr<kv_router_actor> router,
                               std::shared_ptr<grpc::ChannelCredentials> creds,
                               std::shared_ptr<cluster::nats_kv_plane> plane,
                               std::string tls_server_name,
                               std::vector<std::string> own,
                               std::shared_ptr<trace::tracer> tracer,
                               std::shared_ptr<model_catalog> catalog)
  : disc_(std::move(disc)), router_(std::move(router)),
    creds_(std::move(creds)), server_name_(std::move(tls_server_name)),
    plane_(std::move(plane)), tracer_(std::move(tracer)),
    catalog_(std::move(catalog)),
    poller_(std::make_unique<load_poller>(router_, creds_, server_name_)) {
  for (const auto& a : own)
    own_.push_back(same_host_form(a));
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
  waker_->disc = disc_;
  slot_listener_ = router_->on_set([w = waker_] { w->wake(); });
  thread_ = std::thread([this] { run(); });
}

void worker_watcher::follow(const cluster::worker_record& r) {
  if (plane_) {
    auto f =
      std::make_unique<kv_follower>(r, router_, creds_, server_name_, tracer_);
    std::unique_ptr<kv_follower> old;
    {
      std::lock_guard<std::mutex> guard{followers_mtx_};
      old = std::exchange(followers_[r.worker_id], std::move(f));
    }
    return; // `old` stops outside the lock
  }
  auto sub = std::make_shared<kv_subscription>();
  sub->worker_id = r.worker_id;
  sub->record = r;
  sub->channel = cluster::relay_channel(r.relay_endpoint, creds_, server_name_);
  sub->router = router_;
  sub->open();
  if (auto old = std::exchange(subs_[r.worker_id], sub))
    old->stop();
}

bool worker_watcher::answered(const std::string& worker_id) {
  if (auto s = subs_.find(worker_id); s != subs_.end())
    return s->second->answered_once;
  std::lock_guard<std::mutex> guard{followers_mtx_};
  auto f = followers_.find(worker_id);
  return f != followers_.end() && f->second->announced();
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
  router_->forget(slot_listener_);
  waker_->wake();
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
  auto& invalid_records = runtime::global_metrics().get_counter(
    "outrider_discovery_invalid_records_total",
    "Malformed worker records skipped");
  auto& self_records = runtime::global_metrics().get_counter(
    "outrider_discovery_self_records_total",
    "Worker records refused because their relay is this router's address "
    "(counted each time discovery is read)");
  auto& listings = runtime::global_metrics().get_counter(
    "outrider_discovery_listings_total",
    "Times the router read every worker record (on a change, or after a "
    "pause of 0.5-5 s)");
  while (!stopping_) {
    if (!router_->get()) {
      // The supervisor has not started the router actor yet: its slot
      // wakes us when it does.
      std::unique_lock<std::mutex> lock{waker_->mtx};
      waker_->cv.wait_for(lock, std::chrono::milliseconds{500},
                          [this] { return stopping_ || router_->get(); });
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
      last_listing_.clear();
    }
    if (plane_ && plane_->connections() != plane_connections_) {
      // Reconnected to NATS: what was published meanwhile is lost.
      plane_connections_ = plane_->connections();
      std::lock_guard<std::mutex> guard{followers_mtx_};
      for (auto& [id, f] : followers_)
        f->resync("reconnect");
    }
    size_t invalid = 0;
    auto cpu_began = thread_cpu();
    auto records = disc_->list(&invalid);
    listings.inc();
    invalid_records.inc(invalid);
    if (!records.empty() && records == last_listing_) {
      // Nothing changed (the common case at fleet size: records change as
      // workers come and go); only which relays answered may have.
      self_records.inc(last_self_);
      poll_answered();
      pause_after(thread_cpu() - cpu_began);
      continue;
    }
    if (catalog_)
      catalog_->update(records);
    last_self_ = 0;
    std::map<std::string, cluster::worker_record> now;
    for (auto& r : records) {
      auto relay = same_host_form(r.relay_endpoint);
      if (std::find(own_.begin(), own_.end(), relay) != own_.end()) {
        self_records.inc();
        ++last_self_;
        if (!warned_self_.count(r.worker_id)) {
          warned_self_.insert(r.worker_id);
          spdlog::error("router: worker {}'s record names this router's own "
                        "address {} as its relay; refused",
                        r.worker_id, r.relay_endpoint);
        }
        continue;
      }
      now[r.worker_id] = r;
    }
    last_listing_ = std::move(records);
    for (const auto& [id, r] : known_) {
      auto i = now.find(id);
      if (i != now.end() && i->second.instance_id == r.instance_id &&
          i->second.relay_endpoint == r.relay_endpoint)
        continue;
      // Gone, or replaced by another engine instance.
      caf::anon_send(router_->get(), worker_down_atom::value, id);
      unfollow(id);
    }
    auto is_new = [&](const std::string& id, const cluster::worker_record& r) {
      auto k = known_.find(id);
      return k == known_.end() || k->second.instance_id != r.instance_id ||
             k->second.relay_endpoint != r.relay_endpoint;
    };
    size_t fresh = 0;
    for (const auto& [id, r] : now)
      fresh += is_new(id, r);
    // Many records at once (a fleet starting, or records of relays that
    // never answer): their first subscriptions are opened over up to 2 s,
    // 1 ms a record, so that neither they nor their failures come as one
    // burst; a few open at once. Paced here, on this thread: each armed on
    // a gRPC alarm of its own instead (10,000 alarms for a 10,000-worker
    // fleet) left the router applying a third of the fleet's event
    // batches, 5 s behind, with twice the memory (docs/benchmarks.md).
    auto spread = fresh > 16 ? std::min(std::chrono::microseconds{2000000},
                                        std::chrono::microseconds{fresh * 1000})
                             : std::chrono::microseconds{0};
    auto began = std::chrono::steady_clock::now();
    size_t opened = 0;
    for (const auto& [id, r] : now) {
      if (!is_new(id, r))
        continue;
      auto due = began + std::chrono::microseconds{
                           spread.count() * static_cast<int64_t>(opened) /
                           static_cast<int64_t>(std::max<size_t>(fresh, 1))};
      {
        // Stopping wakes it (the destructor's `waker_->wake()`).
        std::unique_lock<std::mutex> lock{waker_->mtx};
        if (waker_->cv.wait_until(lock, due,
                                  [this] { return stopping_.load(); }))
          return;
      }
      follow(r); // placed on once its relay answers (the snapshot)
      ++opened;
    }
    known_ = std::move(now);
    answered_count_ = ~size_t{0}; // the set changed: tell the poller
    poll_answered();
    pause_after(thread_cpu() - cpu_began);
  }
}

void worker_watcher::poll_answered() {
  // Load is asked of workers whose relay answered as a relay: 2,000
  // records of relays no one answers were 2,000 GetLoad calls a second
  // on channels of their own (half a core busy, and a real request
  // delayed by seconds on a busy machine: issue 33 row 11).
  size_t count = 0;
  for (const auto& [id, r] : known_)
    count += answered(id);
  if (count == answered_count_)
    return; // answers only come, never go: the same count, the same set
  answered_count_ = count;
  std::map<std::string, std::string> relays;
  for (const auto& [id, r] : known_)
    if (answered(id))
      relays[id] = r.relay_endpoint;
  poller_->set_workers(std::move(relays));
}

void worker_watcher::pause_after(std::chrono::nanoseconds listing_cpu) {
  // Discovery is listed again on a change (inotify, NATS) or after a
  // pause: 500 ms, or 20 times what the last listing cost this thread,
  // up to 5 s. A fleet's 10,000 record files listed every 500 ms were a
  // fifth of a core beside a router whose actor needed it (the pause only
  // bounds how late a lapsed lease is noticed).
  auto pause = std::clamp(
    std::chrono::duration_cast<std::chrono::milliseconds>(20 * listing_cpu),
    std::chrono::milliseconds{500}, std::chrono::milliseconds{5000});
  disc_->wait_for_change(pause);
}

} // namespace outrider::router
