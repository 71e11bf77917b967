// Any bytes as a record of the store (a damaged file): decoded or refused.
// What decodes must encode back to a record that decodes the same way.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "actors/indexer/index_records.hpp"

using namespace outrider;
using namespace outrider::indexer;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view v{reinterpret_cast<const char*>(data), size};
  std::vector<kv::kv_event> events;
  if (records::decode_events(v, events)) {
    std::vector<kv::kv_event> again;
    if (!records::decode_events(records::encode_events(events), again) ||
        again.size() != events.size())
      __builtin_trap();
  }
  // The first snapshot layout (key `p`) is still read: never a crash.
  local_index first;
  (void)records::decode_snapshot(v, 0, first, true);
  local_index index;
  if (records::decode_snapshot(v, 0, index)) {
    local_index again;
    auto blocks =
      index.ranks().count(0) ? index.ranks().at(0) : local_index::rank_map{};
    if (!records::decode_snapshot(records::encode_snapshot(blocks), 0, again) ||
        again.blocks(0) != index.blocks(0))
      __builtin_trap();
  }
  return 0;
}
