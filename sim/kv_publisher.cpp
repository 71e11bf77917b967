#include "sim/kv_publisher.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include "cluster/kv/seq_frame.hpp"

namespace outrider::sim {

namespace {} // namespace

std::string rank_endpoint(const std::string& base, int rank) {
  if (rank == 0)
    return base;
  if (base.rfind("inproc://", 0) == 0)
    return base + "_dp" + std::to_string(rank);
  auto colon = base.rfind(':');
  if (colon == std::string::npos)
    return base;
  int port = std::atoi(base.c_str() + colon + 1);
  return base.substr(0, colon + 1) + std::to_string(port + rank);
}

kv_publisher::kv_publisher(zmq::context_t& ctx, publisher_config cfg)
  : cfg_(std::move(cfg)), pub_(ctx, zmq::socket_type::pub),
    router_(ctx, zmq::socket_type::router) {
  try {
    pub_.set(zmq::sockopt::sndhwm, cfg_.hwm);
    pub_.set(zmq::sockopt::linger, 0);
    pub_.bind(cfg_.endpoint);
    router_.set(zmq::sockopt::linger, 0);
    // A replay may be the whole buffer: never drop part of it at the HWM.
    router_.set(zmq::sockopt::sndhwm, 0);
    if (!cfg_.replay_endpoint.empty())
      router_.bind(cfg_.replay_endpoint);
  } catch (const zmq::error_t& e) {
    error_ = "cannot bind " + cfg_.endpoint + " / " + cfg_.replay_endpoint +
             ": " + e.what();
    return;
  }
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  thread_ = std::thread([this] { run(); });
}

kv_publisher::~kv_publisher() {
  stopping_ = true;
  if (wake_fd_ >= 0) {
    uint64_t one = 1;
    [[maybe_unused]] auto n = write(wake_fd_, &one, sizeof(one));
  }
  if (thread_.joinable())
    thread_.join();
  if (wake_fd_ >= 0)
    close(wake_fd_);
}

void kv_publisher::publish(std::string payload) {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    queue_.emplace_back(next_seq_.fetch_add(1), std::move(payload));
  }
  uint64_t one = 1;
  [[maybe_unused]] auto n = write(wake_fd_, &one, sizeof(one));
}

void kv_publisher::renumber() {
  std::lock_guard<std::mutex> guard{mtx_};
  next_seq_ = 0;
  renumbered_ = true;
}

void kv_publisher::publish_frames(std::vector<std::string> frames) {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    raw_.push_back(std::move(frames));
  }
  uint64_t one = 1;
  [[maybe_unused]] auto n = write(wake_fd_, &one, sizeof(one));
}

void kv_publisher::run() {
  zmq::pollitem_t items[] = {
    {nullptr, wake_fd_, ZMQ_POLLIN, 0},
    {router_.handle(), 0, ZMQ_POLLIN, 0},
  };
  bool replay = !cfg_.replay_endpoint.empty();
  while (!stopping_.load()) {
    try {
      zmq::poll(items, replay ? 2 : 1,
                std::chrono::milliseconds{drips_.empty() ? 100 : 20});
    } catch (const zmq::error_t&) {
      continue; // EINTR
    }
    if (items[0].revents & ZMQ_POLLIN) {
      uint64_t count;
      [[maybe_unused]] auto n = read(wake_fd_, &count, sizeof(count));
    }
    std::deque<std::pair<uint64_t, std::string>> batch;
    std::deque<std::vector<std::string>> raw;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      batch.swap(queue_);
      raw.swap(raw_);
      if (renumbered_.exchange(false))
        buffer_.clear(); // what was numbered before is gone with it
    }
    for (auto& frames : raw)
      for (size_t i = 0; i < frames.size(); ++i)
        pub_.send(zmq::buffer(frames[i]), i + 1 < frames.size()
                                            ? zmq::send_flags::sndmore
                                            : zmq::send_flags::none);
    for (auto& [seq, payload] : batch) {
      if (!lose_next_.exchange(false)) {
        pub_.send(zmq::buffer(cfg_.topic), zmq::send_flags::sndmore);
        pub_.send(zmq::buffer(kv::encode_seq(seq)), zmq::send_flags::sndmore);
        pub_.send(zmq::buffer(payload), zmq::send_flags::none);
      }
      if (replay) {
        buffer_.emplace_back(seq, std::move(payload));
        while (buffer_.size() > cfg_.buffer_steps)
          buffer_.pop_front();
      }
    }
    if (replay && (items[1].revents & ZMQ_POLLIN))
      serve_replay(router_);
    auto now = std::chrono::steady_clock::now();
    std::erase_if(drips_, [&](const auto& d) { return d.second < now; });
    for (const auto& [id, until] : drips_) {
      router_.send(zmq::buffer(id), zmq::send_flags::sndmore);
      router_.send(zmq::message_t{}, zmq::send_flags::sndmore);
      router_.send(zmq::str_buffer("not a sequence"), zmq::send_flags::none);
    }
  }
}

void kv_publisher::serve_replay(zmq::socket_t& router) {
  // Bounded: at most 64 requests per wake-up.
  for (int k = 0; k < 64; ++k) {
    std::vector<zmq::message_t> frames;
    for (;;) {
      zmq::message_t m;
      auto got = router.recv(m, zmq::recv_flags::dontwait);
      if (!got)
        break;
      bool more = m.more();
      frames.push_back(std::move(m));
      if (!more)
        break;
    }
    if (frames.empty())
      return;
    // [identity, "", start_seq(8)]
    if (frames.size() != 3 || frames[1].size() != 0 || frames[2].size() != 8) {
      bad_requests_.fetch_add(1);
      continue;
    }
    auto start = kv::decode_seq(frames[2].data());
    std::string id(static_cast<const char*>(frames[0].data()),
                   frames[0].size());
    if (drip_.load()) {
      drips_.emplace_back(id, std::chrono::steady_clock::now() +
                                std::chrono::minutes{1});
      continue;
    }
    auto send_reply = [&](const std::string& seq8, const std::string& payload,
                          bool end) {
      router.send(zmq::buffer(id), zmq::send_flags::sndmore);
      router.send(zmq::message_t{}, zmq::send_flags::sndmore);
      if (cfg_.replay_topic_frame)
        router.send(zmq::buffer(end ? std::string{} : cfg_.topic),
                    zmq::send_flags::sndmore);
      router.send(zmq::buffer(seq8), zmq::send_flags::sndmore);
      router.send(zmq::buffer(payload), zmq::send_flags::none);
    };
    for (const auto& [seq, payload] : buffer_)
      if (seq >= start)
        send_reply(kv::encode_seq(seq), payload, false);
    send_reply(kv::encode_seq(kv::replay_end_seq), std::string{}, true);
  }
}

} // namespace outrider::sim
