#pragma once

// What routers tell each other of their bookings (--share-bookings): a
// value type; its wire form and transport are in nats_bookings.cpp.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace outrider::cluster {

/// One change of a router's bookings.
struct booking_note {
  enum class op { add, prefilled, release, alive };
  op what = op::alive;
  std::string router_id;
  uint64_t key = 0; // the booking, unique per router
  // add only: where, how much, and the prompt's block hashes (predicted
  // there by the others too).
  std::string worker_id;
  int rank = 0;
  uint64_t prefill_tokens = 0;
  uint64_t decode_blocks = 0;
  std::vector<uint64_t> blocks;
  /// add only: the session the request belongs to (session affinity), so
  /// every replica sends the session's next turn to the same worker;
  /// empty: none. At most `max_note_session_bytes`.
  std::string session;
};

inline constexpr size_t max_note_session_bytes = 256;

/// Notes larger than this many blocks carry none (load only).
inline constexpr size_t max_note_blocks = 8192;

} // namespace outrider::cluster
