#include "actors/router/dispatch/engine_calls.hpp"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include "actors/router/dispatch/relay_mux_client.hpp"
#include "cluster/tls.hpp"

namespace outrider::router {

engine_calls::engine_calls(const dispatch_config& cfg)
  : relay_creds_(cfg.relay_credentials),
    relay_server_name_(cfg.relay_server_name) {}

engine_calls::~engine_calls() {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    stopping_ = true;
  }
  sweep_cv_.notify_all();
  if (sweeper_.joinable())
    sweeper_.join();
  chores_.stop();
}

void engine_calls::sweep() {
  std::unique_lock<std::mutex> guard{mtx_};
  while (!sweep_cv_.wait_for(guard, std::chrono::seconds{1},
                             [this] { return stopping_; })) {
    std::vector<std::shared_ptr<mux_client>> muxes;
    for (const auto& [key, m] : muxes_)
      muxes.push_back(m);
    muxes.insert(muxes.end(), draining_muxes_.begin(), draining_muxes_.end());
    guard.unlock();
    // Outside mtx_: a request's end may start its next attempt here.
    auto now = std::chrono::system_clock::now();
    for (const auto& m : muxes)
      m->expire(now);
    muxes.clear();
    guard.lock();
  }
}

std::shared_ptr<grpc::Channel>
engine_calls::channel_for(const std::string& endpoint, bool relay) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto& ch = channels_[endpoint];
  if (!ch)
    ch = relay && relay_creds_
           ? cluster::relay_channel(endpoint, relay_creds_, relay_server_name_)
           : grpc::CreateChannel(cluster::channel_target(endpoint),
                                 grpc::InsecureChannelCredentials());
  return ch;
}

std::shared_ptr<mux_client> engine_calls::mux_for(const std::string& endpoint,
                                                  const std::string& worker) {
  auto ch = channel_for(endpoint, true);
  std::lock_guard<std::mutex> guard{mtx_};
  if (cut_.load())
    return nullptr;
  auto& m = muxes_[endpoint + '\n' + worker];
  if (m && !m->ended() && !m->draining())
    return m;
  if (m && !m->ended())
    draining_muxes_.push_back(m); // its requests run on there
  m = mux_client::open(ch, worker);
  auto opened = m;
  if (!sweeper_.joinable())
    sweeper_ = std::thread{[this] { sweep(); }};
  // Streams to relays that went end; their entries go with the next open.
  for (auto it = muxes_.begin(); it != muxes_.end();)
    it = it->second->ended() ? muxes_.erase(it) : std::next(it);
  std::erase_if(draining_muxes_, [](const auto& d) { return d->ended(); });
  return opened;
}

void engine_calls::mux_unsupported(const std::string& endpoint) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto [it, fresh] = no_mux_.try_emplace(endpoint);
  it->second = std::chrono::steady_clock::now() + std::chrono::minutes{1};
  if (fresh)
    spdlog::warn("router: the relay at {} does not serve RelayMux; its "
                 "requests go as Generate streams (--dispatch mux)",
                 endpoint);
}

bool engine_calls::mux_refused(const std::string& endpoint) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto it = no_mux_.find(endpoint);
  if (it == no_mux_.end())
    return false;
  if (std::chrono::steady_clock::now() < it->second)
    return true;
  no_mux_.erase(it); // try it again
  return false;
}

bool engine_calls::track(grpc::ClientContext* ctx) {
  std::lock_guard<std::mutex> guard{mtx_};
  if (cut_.load())
    return false;
  calls_.insert(ctx);
  return true;
}

void engine_calls::untrack(grpc::ClientContext* ctx) {
  std::lock_guard<std::mutex> guard{mtx_};
  calls_.erase(ctx);
}

void engine_calls::chore(std::function<void()> fn) {
  if (!chores_.try_run(std::move(fn)))
    spdlog::warn("router: too many engine aborts pending; one was dropped");
}

void engine_calls::cancel_all() {
  std::lock_guard<std::mutex> guard{mtx_};
  cut_ = true;
  for (auto* ctx : calls_)
    ctx->TryCancel();
  for (auto& [key, m] : muxes_)
    m->cancel_all();
  for (auto& m : draining_muxes_)
    m->cancel_all();
}

} // namespace outrider::router
