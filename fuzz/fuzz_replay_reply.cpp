// Any bytes as the frames of a replay reply (a hostile replay socket): the
// first byte says how many frames (0-7), then each frame is a length byte
// and that many bytes (cut short at the end of the input). Classified as a
// batch, the end, or malformed; never out of bounds.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "cluster/kv/replay_frame.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0)
    return 0;
  size_t want = data[0] % 8;
  size_t at = 1;
  std::vector<std::string_view> frames;
  while (frames.size() < want && at < size) {
    size_t want_len = data[at];
    ++at;
    size_t len = std::min<size_t>(want_len, size - at);
    frames.emplace_back(reinterpret_cast<const char*>(data + at), len);
    at += len;
  }
  auto r = outrider::kv::parse_replay_reply(frames);
  if (r.what == outrider::kv::replay_reply::batch &&
      (r.payload.data() != frames.back().data() ||
       r.seq == outrider::kv::replay_end_seq))
    __builtin_trap();
  return 0;
}
