#include "cluster/discovery_from.hpp"

#include "cluster/nats_discovery.hpp"

namespace outrider::cluster {

std::shared_ptr<discovery>
discovery_from(const discovery_settings& s,
               std::function<void(bool)> on_connection) {
  switch (s.backend) {
  case discovery_settings::kind::memory:
    return std::make_shared<memory_discovery>();
  case discovery_settings::kind::nats: {
    auto c = s.nats;
    c.on_connection = std::move(on_connection);
    return std::make_shared<nats_discovery>(std::move(c));
  }
  default:
    return std::make_shared<file_discovery>(s.dir, s.ttl);
  }
}

} // namespace outrider::cluster
