#pragma once

#include <cstdint>
#include <string>

namespace outrider::kv {

/// A KV event sequence number as it travels in ZMQ frames (docs/wire.md,
/// "KV events: transport"): 8 bytes, unsigned, big-endian. All ones is the end
/// marker of a replay.
inline std::string encode_seq(uint64_t v) {
  std::string out(8, '\0');
  for (int i = 7; i >= 0; --i, v >>= 8)
    out[static_cast<size_t>(i)] = static_cast<char>(v & 0xff);
  return out;
}

/// Reads 8 bytes at `p` (the caller checked the frame's size).
inline uint64_t decode_seq(const void* p) {
  auto* b = static_cast<const unsigned char*>(p);
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i)
    v = (v << 8) | b[i];
  return v;
}

inline constexpr uint64_t replay_end_seq = UINT64_MAX;

} // namespace outrider::kv
