#include "cluster/kv/kv_event.hpp"

#include <algorithm>
#include <unordered_map>

namespace outrider::kv {

std::vector<kv_event> stores_parents_first(std::vector<cached_block> blocks) {
  std::unordered_map<uint64_t, size_t> at;
  at.reserve(blocks.size());
  for (size_t i = 0; i < blocks.size(); ++i)
    at[blocks[i].hash] = i;
  // Depth in the chain, memoized so that the walk stays linear.
  std::vector<size_t> depth(blocks.size(), SIZE_MAX);
  std::vector<size_t> path;
  for (size_t i = 0; i < blocks.size(); ++i) {
    path.clear();
    size_t j = i;
    size_t base = 0;
    for (size_t guard = 0; guard <= blocks.size(); ++guard) {
      if (depth[j] != SIZE_MAX) {
        base = depth[j] + 1;
        break;
      }
      path.push_back(j);
      const auto& parent = blocks[j].parent;
      auto p = parent ? at.find(*parent) : at.end();
      if (p == at.end())
        break;
      j = p->second;
    }
    for (auto it = path.rbegin(); it != path.rend(); ++it)
      if (depth[*it] == SIZE_MAX)
        depth[*it] = base++;
  }
  std::vector<size_t> order(blocks.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return depth[a] < depth[b]; });
  std::vector<kv_event> out;
  out.reserve(blocks.size());
  for (auto i : order) {
    auto& b = blocks[i];
    auto size = static_cast<uint32_t>(b.token_ids.size());
    out.push_back(
      block_stored{{b.hash}, b.parent, std::move(b.token_ids), size});
  }
  return out;
}

} // namespace outrider::kv
