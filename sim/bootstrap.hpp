#pragma once

// SGLang's bootstrap handoff, simulated (proto/sim_bootstrap.proto): a
// prefill engine offers a prompt's KV under a room and holds its leg open
// until a decode engine fetches the room; the decode engine fetches it
// from the prefill engine's bootstrap port before it decodes. Every wait
// is bounded.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <grpcpp/grpcpp.h>

namespace outrider::sim {

class bootstrap_rooms {
 public:
  /// The prefill side: the KV of `prompt_tokens` tokens on `rank` is ready
  /// under `room`; waits until it is fetched (true) or `timeout` passes or
  /// `gone()` says the leg was dropped (false). The room is forgotten.
  bool offer_and_wait(int64_t room, uint32_t prompt_tokens, int rank,
                      std::chrono::milliseconds timeout,
                      const std::function<bool()>& gone);
  /// The bootstrap server's side: waits up to `timeout` for the room's
  /// prefill, then hands it over. NOT_FOUND when it never came,
  /// FAILED_PRECONDITION when the prompts differ in length.
  grpc::Status fetch(int64_t room, uint32_t prompt_tokens,
                     std::chrono::milliseconds timeout, int* rank);
  size_t waiting() const;

 private:
  struct room_state {
    uint32_t prompt_tokens = 0;
    int rank = 0;
    bool fetched = false;
  };
  mutable std::mutex mtx_;
  std::condition_variable cv_;
  std::map<int64_t, room_state> rooms_;
};

/// The KvBootstrap service over `rooms`; `timeout` bounds a fetch's wait.
std::unique_ptr<grpc::Service>
make_bootstrap_service(bootstrap_rooms& rooms,
                       std::chrono::milliseconds timeout);

/// The decode side: fetches `room` from the prefill engine's bootstrap
/// server at host:port, waiting at most `timeout`. Channels are cached.
grpc::Status fetch_room(const std::string& host, int port, int64_t room,
                        uint32_t prompt_tokens,
                        std::chrono::milliseconds timeout);

} // namespace outrider::sim
