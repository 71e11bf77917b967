#pragma once

#include <functional>
#include <memory>
#include <string>

#include "cluster/discovery.hpp"
#include "runtime/options.hpp"

namespace outrider::cluster {

/// The discovery backend `--discovery` names: `file` in `dir`, `nats`
/// (`--nats-*`; `on_connection` hears when its connection goes down or
/// comes back), or `memory`. Not opened yet.
std::shared_ptr<discovery>
discovery_from(const runtime::options& o, const std::string& dir,
               std::function<void(bool)> on_connection = {});

} // namespace outrider::cluster
