// Any bytes as a KV event batch (what a ZeroMQ peer may send): decoded or
// refused with a reason, never a crash, a hang or unbounded memory. What
// decodes is applied to the router's tiered index (keys from adapters and
// extra keys, tiers, placeholders, groups, a cap) and matched against.
#include <cstddef>
#include <cstdint>

#include "actors/indexer/tiered_index.hpp"
#include "cluster/kv/block_hash.hpp"
#include "cluster/kv/kv_decoder.hpp"
#include "cluster/kv/seq_frame.hpp"

using namespace outrider;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = kv::decode_kv_batch(data, size, 4096);
  if (r.ok && r.batch.events.size() > 4096)
    __builtin_trap(); // the event cap must hold
  if (size >= 8)
    (void)kv::decode_seq(data);
  if (!r.ok)
    return 0;
  for (const auto& ev : r.batch.events)
    if (const auto* s = std::get_if<kv::block_stored>(&ev))
      if (!s->tokenless() &&
          s->token_ids.size() != s->block_hashes.size() * s->block_size)
        __builtin_trap(); // the decoder promises whole blocks
  indexer::tiered_index idx(kv::block_hash_seed);
  idx.set_cap(0, kv::medium::cpu, 8);
  std::vector<uint64_t> touched;
  idx.apply(0, r.batch.events, &touched);
  idx.apply(1, r.batch.events);
  std::vector<uint32_t> prompt(64);
  for (uint32_t i = 0; i < prompt.size(); ++i)
    prompt[i] = i;
  for (const auto& o : idx.find(kv::sequence_hashes(prompt.data(), 64, 4)))
    if (o.credit < o.gpu_blocks || o.any_blocks < o.gpu_blocks)
      __builtin_trap();
  idx.clear_slot(0);
  idx.clear_slot(1);
  if (idx.entries() != 0)
    __builtin_trap(); // every holder went with its slot
  return 0;
}
