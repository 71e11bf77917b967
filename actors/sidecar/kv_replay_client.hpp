#pragma once

// The asking side of an engine's KV replay (docs/wire.md): one DEALER
// request for the batches from a sequence on, read whole within bounds.

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace zmq {
class context_t;
}

namespace outrider::sidecar {

struct replay_result {
  bool ok = false; // the engine answered, end marker included
  std::vector<std::pair<uint64_t, std::string>> batches;
};

/// Why part of a replay was refused (a metric reason, and detail to log).
using reject_fn =
  std::function<void(const std::string& reason, const std::string& detail)>;

/// Asks `endpoint` for every batch from `from` on. One replay, whole: the
/// engine sends at most its buffer, quickly; a peer that drips frames,
/// floods malformed ones, sends more than 256 MiB or a frame over
/// `max_message_bytes`, or does not end within 10 s is cut off, and the
/// replay counts as unanswered (`ok` false).
replay_result ask_replay(zmq::context_t& ctx, const std::string& endpoint,
                         uint64_t from, int64_t max_message_bytes,
                         const reject_fn& reject);

} // namespace outrider::sidecar
