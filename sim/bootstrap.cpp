#include "sim/bootstrap.hpp"

#include "sim_bootstrap.grpc.pb.h"

namespace outrider::sim {

namespace bs = outrider::sim::v1;
using clock_type = std::chrono::steady_clock;

bool bootstrap_rooms::offer_and_wait(int64_t room, uint32_t prompt_tokens,
                                     int rank,
                                     std::chrono::milliseconds timeout,
                                     const std::function<bool()>& gone) {
  std::unique_lock lock(mtx_);
  rooms_[room] = room_state{prompt_tokens, rank, false};
  cv_.notify_all();
  auto until = clock_type::now() + timeout;
  // Woken every 50 ms to notice a dropped leg.
  while (!rooms_[room].fetched && clock_type::now() < until && !gone())
    cv_.wait_for(lock, std::chrono::milliseconds{50});
  bool fetched = rooms_[room].fetched;
  rooms_.erase(room);
  return fetched;
}

grpc::Status bootstrap_rooms::fetch(int64_t room, uint32_t prompt_tokens,
                                    std::chrono::milliseconds timeout,
                                    int* rank) {
  std::unique_lock lock(mtx_);
  auto ready = [&] {
    auto i = rooms_.find(room);
    return i != rooms_.end() && !i->second.fetched;
  };
  if (!cv_.wait_for(lock, timeout, ready))
    return {grpc::StatusCode::NOT_FOUND, "bootstrap room " +
                                           std::to_string(room) +
                                           ": no prefill arrived in time"};
  auto& r = rooms_[room];
  if (r.prompt_tokens != prompt_tokens)
    return {grpc::StatusCode::FAILED_PRECONDITION,
            "bootstrap room " + std::to_string(room) + " holds " +
              std::to_string(r.prompt_tokens) + " tokens, not " +
              std::to_string(prompt_tokens)};
  r.fetched = true;
  *rank = r.rank;
  cv_.notify_all();
  return grpc::Status::OK;
}

size_t bootstrap_rooms::waiting() const {
  std::lock_guard lock(mtx_);
  return rooms_.size();
}

namespace {

class bootstrap_service final : public bs::KvBootstrap::Service {
 public:
  bootstrap_service(bootstrap_rooms& rooms, std::chrono::milliseconds timeout)
    : rooms_(rooms), timeout_(timeout) {}

  grpc::Status FetchRoom(grpc::ServerContext*, const bs::FetchRoomRequest* in,
                         bs::FetchRoomResponse* out) override {
    int rank = 0;
    auto st = rooms_.fetch(in->room(), in->prompt_tokens(), timeout_, &rank);
    out->set_prompt_tokens(in->prompt_tokens());
    out->set_dp_rank(rank);
    return st;
  }

 private:
  bootstrap_rooms& rooms_;
  std::chrono::milliseconds timeout_;
};

} // namespace

std::unique_ptr<grpc::Service>
make_bootstrap_service(bootstrap_rooms& rooms,
                       std::chrono::milliseconds timeout) {
  return std::make_unique<bootstrap_service>(rooms, timeout);
}

grpc::Status fetch_room(const std::string& host, int port, int64_t room,
                        uint32_t prompt_tokens,
                        std::chrono::milliseconds timeout) {
  static std::mutex mtx;
  static std::map<std::string, std::shared_ptr<grpc::Channel>> channels;
  auto target = host + ":" + std::to_string(port);
  std::shared_ptr<grpc::Channel> ch;
  {
    std::lock_guard lock(mtx);
    auto& c = channels[target];
    if (!c)
      c = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
    ch = c;
  }
  auto stub = bs::KvBootstrap::NewStub(ch);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  bs::FetchRoomRequest req;
  req.set_room(room);
  req.set_prompt_tokens(prompt_tokens);
  bs::FetchRoomResponse resp;
  return stub->FetchRoom(&ctx, req, &resp);
}

} // namespace outrider::sim
