#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "cluster/discovery.hpp"
#include "cluster/nats_link.hpp"

namespace outrider::cluster {

/// Where workers are found (`--discovery`, `--discovery-dir`,
/// `--discovery-ttl`, `--nats-*`).
struct discovery_settings {
  enum class kind { file, nats, memory };
  kind backend = kind::file;
  std::string dir;                  // file: the records' folder
  std::chrono::milliseconds ttl{0}; // a record's lease
  nats_config nats;                 // nats (also the NATS event plane's)
};

/// The backend `s` names, not opened yet. With NATS, `on_connection` hears
/// when its connection goes down or comes back.
std::shared_ptr<discovery>
discovery_from(const discovery_settings& s,
               std::function<void(bool)> on_connection = {});

} // namespace outrider::cluster
