#include "cluster/channel_pool.hpp"

#include <algorithm>

namespace outrider::cluster {

std::shared_ptr<grpc::Channel>
channel_pool::get(const std::string& endpoint,
                  const std::shared_ptr<grpc::ChannelCredentials>& creds,
                  const std::string& server_name) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto [first, last] = by_endpoint_.equal_range(endpoint);
  for (auto it = first; it != last; ++it)
    if (it->second.creds == creds && it->second.server_name == server_name) {
      if (auto ch = it->second.channel.lock())
        return ch;
      auto ch = make_(endpoint, creds, server_name);
      it->second.channel = ch;
      return ch;
    }
  auto ch = make_(endpoint, creds, server_name);
  by_endpoint_.emplace(endpoint, entry{creds, server_name, ch});
  if (by_endpoint_.size() >= std::max<size_t>(64, 2 * swept_at_))
    sweep();
  return ch;
}

void channel_pool::sweep() {
  for (auto it = by_endpoint_.begin(); it != by_endpoint_.end();)
    it = it->second.channel.expired() ? by_endpoint_.erase(it) : std::next(it);
  swept_at_ = by_endpoint_.size();
}

size_t channel_pool::entries() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return by_endpoint_.size();
}

size_t channel_pool::live() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return static_cast<size_t>(
    std::count_if(by_endpoint_.begin(), by_endpoint_.end(),
                  [](const auto& e) { return !e.second.channel.expired(); }));
}

} // namespace outrider::cluster
