#include "cluster/kv/kv_event.hpp"

#include <algorithm>
#include <unordered_map>

namespace outrider::kv {

const char* to_string(kv::medium m) {
  switch (m) {
  case medium::gpu:
    return "GPU";
  case medium::cpu:
    return "CPU";
  case medium::storage:
    return "STORAGE";
  }
  return "GPU";
}

std::optional<kv::medium> medium_of(std::string_view name) {
  if (name == "GPU")
    return medium::gpu;
  if (name == "CPU" || name == "CPU_PINNED")
    return medium::cpu;
  if (name == "STORAGE" || name == "FS" || name == "OBJ" || name == "DISK" ||
      name == "EXTERNAL")
    return medium::storage;
  return std::nullopt;
}

const char* to_string(kv::locality l) {
  switch (l) {
  case locality::local:
    return "LOCAL";
  case locality::remote:
    return "REMOTE";
  case locality::unspecified:
    break;
  }
  return "";
}

bool serves_prefix(std::string_view kind) {
  return kind.empty() || kind == "full_attention" || kind == "mla_attention" ||
         kind == "sink_full_attention";
}

block_identity identity_of(const block_stored& s, size_t i) {
  block_identity id;
  if (!s.lora_name.empty())
    id.lora = s.lora_name;
  else if (s.lora_id)
    id.lora = "#lora-id:" + std::to_string(*s.lora_id);
  if (i < s.extra_keys.size()) {
    const auto& ex = s.extra_keys[i];
    size_t from = 0;
    // vLLM puts the adapter's name first; it is the seed, not an extra.
    if (!ex.empty() && ex[0].k == extra_key::kind::text && !id.lora.empty() &&
        ex[0].value == s.lora_name)
      from = 1;
    id.extra.assign(ex.begin() + static_cast<ptrdiff_t>(from), ex.end());
  }
  if (i == 0 && !s.parent_block_hash && !s.cache_salt.empty())
    id.extra.push_back(extra_key{extra_key::kind::text, s.cache_salt, 0});
  return id;
}

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
    block_stored s;
    s.block_hashes = {b.hash};
    s.parent_block_hash = b.parent;
    s.block_size = static_cast<uint32_t>(b.token_ids.size());
    s.token_ids = std::move(b.token_ids);
    s.lora_name = b.identity.lora;
    if (!b.identity.lora.empty() || !b.identity.extra.empty()) {
      block_extra ex;
      if (!b.identity.lora.empty())
        ex.push_back(extra_key{extra_key::kind::text, b.identity.lora, 0});
      ex.insert(ex.end(), b.identity.extra.begin(), b.identity.extra.end());
      s.extra_keys.push_back(std::move(ex));
    }
    s.medium = b.medium;
    s.locality = b.locality;
    s.ownership = std::move(b.ownership);
    s.group_idx = b.group_idx;
    s.spec_kind = b.spec_kind;
    out.push_back(std::move(s));
  }
  return out;
}

} // namespace outrider::kv
