#pragma once

#include <string>

#include "openengine.pb.h"

namespace outrider::router {

/// Writes what keys a request's KV besides its tokens into an OpenEngine
/// request: the adapter (`lora_name`, field 11) and the tenant's salt
/// (`kv.cache_salt`, field 8.3). The relay passes both on to its engine in
/// that engine's own fields (docs/wire.md).
inline void set_identity(openengine::v1::GenerateRequest& req,
                         const std::string& lora,
                         const std::string& cache_salt) {
  if (!lora.empty())
    req.set_lora_name(lora);
  if (!cache_salt.empty())
    req.mutable_kv()->set_cache_salt(cache_salt);
}

} // namespace outrider::router
