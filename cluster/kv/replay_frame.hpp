#pragma once

// One reply of an engine's replay socket, as the forwarder reads it
// (docs/wire.md, "KV events: transport"): ["", topic, seq(8), payload] from
// current vLLM, ["", seq(8), payload] from older vLLM and SGLang; the end
// marker has seq all ones.

#include <cstdint>
#include <string_view>
#include <vector>

#include "cluster/kv/seq_frame.hpp"

namespace outrider::kv {

struct replay_reply {
  enum kind { batch, end, malformed };
  kind what = malformed;
  uint64_t seq = 0;
  std::string_view payload; // into the last frame (batch only)
};

/// Classifies the frames of one reply; never reads past a frame.
inline replay_reply
parse_replay_reply(const std::vector<std::string_view>& frames) {
  replay_reply r;
  if ((frames.size() != 4 && frames.size() != 3) || !frames[0].empty() ||
      frames[frames.size() - 2].size() != 8)
    return r;
  r.seq = decode_seq(frames[frames.size() - 2].data());
  if (r.seq == replay_end_seq) {
    r.what = replay_reply::end;
    return r;
  }
  r.what = replay_reply::batch;
  r.payload = frames.back();
  return r;
}

} // namespace outrider::kv
