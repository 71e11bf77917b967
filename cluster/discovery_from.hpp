#pragma once

#include <functional>
#include <memory>
#include <string>

#include "cluster/discovery.hpp"
#include "cluster/nats_link.hpp"
#include "runtime/options.hpp"

namespace outrider::cluster {

/// The discovery backend `--discovery` names: `file` in `dir`, `nats`
/// (`--nats-*`; `on_connection` hears when its connection goes down or
/// comes back), or `memory`. Not opened yet.
std::shared_ptr<discovery>
discovery_from(const runtime::options& o, const std::string& dir,
               std::function<void(bool)> on_connection = {});

/// The NATS settings of `--nats-*` (servers, bucket, subject, credentials).
nats_config nats_config_from(const runtime::options& o,
                             std::function<void(bool)> on_connection = {});

} // namespace outrider::cluster
