#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "actors/router/core/migration.hpp"
#include "openengine.pb.h"

namespace outrider::router {

/// Writes what keys a request's KV besides its tokens into an OpenEngine
/// request: the adapter (`lora_name`, field 11) and the tenant's salt
/// (`kv.cache_salt`, field 8.3), and the prompt's media items (`media`,
/// field 10, outrider's MediaInput fields). The relay passes them on to its
/// engine in that engine's own fields, or refuses (docs/wire.md).
inline void
set_identity(openengine::v1::GenerateRequest& req, const std::string& lora,
             const std::string& cache_salt,
             const std::vector<generate_params::media_item>& media) {
  if (!lora.empty())
    req.set_lora_name(lora);
  if (!cache_salt.empty())
    req.mutable_kv()->set_cache_salt(cache_salt);
  for (const auto& m : media) {
    auto* item = req.add_media();
    item->set_modality("image");
    item->set_url(m.url);
    item->set_uuid(m.uuid);
    item->set_offset(m.offset);
    item->set_length(m.length);
  }
}

/// What keys the prompt besides its tokens, for placement. Media items the
/// client named (uuid) and measured (length) key the blocks they overlap,
/// as engines key them; otherwise nothing at or past the first item is
/// matched (its identifier or expansion on the engine is not known).
inline kv::prompt_identity
prompt_identity_of(const std::string& lora, const std::string& cache_salt,
                   const std::vector<generate_params::media_item>& media) {
  kv::prompt_identity id{lora, cache_salt, {}, {}};
  bool known = !media.empty();
  for (const auto& m : media)
    known = known && !m.uuid.empty() && m.length > 0;
  if (known) {
    for (const auto& m : media)
      id.media.push_back({m.uuid, m.offset, m.length});
    std::sort(id.media.begin(), id.media.end(),
              [](const auto& a, const auto& b) { return a.offset < b.offset; });
    return id;
  }
  for (const auto& m : media)
    id.match_limit = std::min(id.match_limit.value_or(SIZE_MAX),
                              static_cast<size_t>(m.offset));
  return id;
}

} // namespace outrider::router
