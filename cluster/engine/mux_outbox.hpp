#pragma once

// The next message of a RelayMux stream (proto/relay_mux.proto) as a relay
// gathers it while a write is in flight: one Update per request id, in the
// order the ids first come, each with its responses in order and, last, its
// end. Shared by the sidecar's relay and the fleet simulator's. Not
// thread-safe: its owner's lock guards it.

#include <cstdint>
#include <unordered_map>

#include <grpcpp/grpcpp.h>

#include "relay_mux.pb.h"

namespace outrider::engine {

class mux_outbox {
 public:
  /// Request `id`'s update in the next message (made on first use).
  outrider::relaymux::v1::Update& update_for(uint64_t id) {
    auto [it, fresh] =
      slot_.try_emplace(id, static_cast<int>(next_.updates_size()));
    if (fresh)
      next_.add_updates()->set_id(id);
    return *next_.mutable_updates(it->second);
  }

  /// Request `id` ended with `st`: its last update.
  void end(uint64_t id, const grpc::Status& st) {
    auto& u = update_for(id);
    u.set_done(true);
    u.set_code(static_cast<int32_t>(st.error_code()));
    u.set_message(st.error_message());
  }

  bool empty() const { return next_.updates_size() == 0; }

  /// What was gathered, into `out` (the message to write); gathering
  /// starts anew.
  void take(outrider::relaymux::v1::MuxResponse& out) {
    out.Swap(&next_);
    clear();
  }

  void clear() {
    next_.Clear();
    slot_.clear();
  }

 private:
  outrider::relaymux::v1::MuxResponse next_;
  std::unordered_map<uint64_t, int> slot_; // id -> its update in next_
};

} // namespace outrider::engine
