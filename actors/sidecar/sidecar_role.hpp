#pragma once

#include <vector>

#include "actors/sidecar/sidecar_settings.hpp"
#include "runtime/app.hpp"

namespace outrider::sidecar {

/// `--role sidecar`: the indexer, the registrar and the lifecycle under the
/// root supervisor, the relay beside them, `/debug/index` on the status
/// server.
std::vector<runtime::child_spec> sidecar_children(runtime::role_env& ctx,
                                                  const sidecar_settings& s);

} // namespace outrider::sidecar
