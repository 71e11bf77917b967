// Any bytes as a KV event batch (what a ZeroMQ peer may send): decoded or
// refused with a reason, never a crash, a hang or unbounded memory.
#include <cstddef>
#include <cstdint>

#include "cluster/kv/kv_decoder.hpp"
#include "cluster/kv/seq_frame.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = outrider::kv::decode_kv_batch(data, size, 4096);
  if (r.ok && r.batch.events.size() > 4096)
    __builtin_trap(); // the event cap must hold
  if (size >= 8)
    (void)outrider::kv::decode_seq(data);
  return 0;
}
