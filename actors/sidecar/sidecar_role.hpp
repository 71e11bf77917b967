#pragma once

#include <vector>

#include "runtime/app.hpp"

namespace outrider::sidecar {

/// `--role sidecar`: the indexer, the registrar and the lifecycle under the
/// root supervisor, the relay beside them, `/debug/index` on the status
/// server.
std::vector<runtime::child_spec> sidecar_children(runtime::role_context& ctx);

} // namespace outrider::sidecar
