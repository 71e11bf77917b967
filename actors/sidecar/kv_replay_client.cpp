#include "actors/sidecar/kv_replay_client.hpp"

#include <algorithm>
#include <chrono>
#include <zmq.hpp>

#include <spdlog/spdlog.h>

#include "cluster/kv/replay_frame.hpp"
#include "cluster/kv/seq_frame.hpp"

namespace outrider::sidecar {

namespace {

using clock_type = std::chrono::steady_clock;

constexpr auto replay_deadline = std::chrono::seconds{10};
constexpr size_t max_replay_bytes = size_t{256} << 20;
constexpr int max_malformed_replay_frames = 64;

} // namespace

replay_result ask_replay(zmq::context_t& ctx, const std::string& endpoint,
                         uint64_t from, int64_t max_message_bytes,
                         const reject_fn& reject) {
  replay_result out;
  try {
    zmq::socket_t dealer{ctx, zmq::socket_type::dealer};
    dealer.set(zmq::sockopt::rcvtimeo, 2000);
    dealer.set(zmq::sockopt::linger, 0);
    // A replay socket lives for one replay: over the limit, ZeroMQ drops
    // it before allocating, and the replay counts as unanswered.
    dealer.set(zmq::sockopt::maxmsgsize, max_message_bytes);
    dealer.connect(endpoint);
    dealer.send(zmq::message_t{}, zmq::send_flags::sndmore);
    dealer.send(zmq::buffer(kv::encode_seq(from)), zmq::send_flags::none);
    auto deadline = clock_type::now() + replay_deadline;
    size_t bytes = 0;
    int malformed = 0;
    // Bounded by the deadline, the byte cap and the malformed-frame cap.
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - clock_type::now());
      if (left.count() <= 0) {
        reject("replay_deadline", "no end of replay within " +
                                    std::to_string(replay_deadline.count()) +
                                    " s");
        return out;
      }
      dealer.set(zmq::sockopt::rcvtimeo,
                 static_cast<int>(std::min<int64_t>(left.count(), 2000)));
      std::vector<zmq::message_t> frames;
      for (int k = 0; k < 8; ++k) {
        zmq::message_t m;
        if (!dealer.recv(m))
          return out; // timed out: no answer
        bool more = m.more();
        bytes += m.size();
        frames.push_back(std::move(m));
        if (!more)
          break;
      }
      if (bytes > max_replay_bytes) {
        reject("replay_too_large",
               "more than " + std::to_string(max_replay_bytes) + " bytes");
        return out;
      }
      std::vector<std::string_view> views;
      for (const auto& f : frames)
        views.emplace_back(static_cast<const char*>(f.data()), f.size());
      auto reply = kv::parse_replay_reply(views);
      if (reply.what == kv::replay_reply::malformed) {
        reject("malformed_replay_frame",
               std::to_string(frames.size()) + " frames");
        if (++malformed >= max_malformed_replay_frames)
          return out;
        continue;
      }
      if (reply.what == kv::replay_reply::end) {
        out.ok = true;
        return out;
      }
      out.batches.emplace_back(reply.seq, std::string{reply.payload});
    }
  } catch (const zmq::error_t& e) {
    spdlog::warn("kv_forwarder: replay from {} failed: {}", endpoint, e.what());
  }
  return out;
}

} // namespace outrider::sidecar
