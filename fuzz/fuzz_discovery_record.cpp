// Any bytes as a discovery record (a file another process wrote): a valid
// record whose numbers are in range, or a reason.
#include <cstddef>
#include <cstdint>
#include <string>

#include "cluster/discovery.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text{reinterpret_cast<const char*>(data), size};
  std::string why;
  auto r = outrider::cluster::record_from_json(text, &why);
  if (r && r->data_parallel_size > outrider::cluster::max_data_parallel_size)
    __builtin_trap();
  if (r) {
    // What was accepted survives its own serialisation.
    auto again =
      outrider::cluster::record_from_json(outrider::cluster::to_json(*r), &why);
    if (!again || again->worker_id != r->worker_id)
      __builtin_trap();
  }
  return 0;
}
