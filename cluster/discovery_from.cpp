#include "cluster/discovery_from.hpp"

#include <sstream>

#include "cluster/nats_discovery.hpp"
#include "runtime/option_keys.hpp"

namespace outrider::cluster {

namespace opt = runtime::opt;

nats_config nats_config_from(const runtime::options& o,
                             std::function<void(bool)> on_connection) {
  nats_config c;
  c.urls.clear();
  std::istringstream in{o.get(opt::nats_url)};
  for (std::string url; std::getline(in, url, ',');)
    if (!url.empty())
      c.urls.push_back(url);
  c.bucket = o.get(opt::nats_bucket);
  c.ttl = o.get(opt::discovery_ttl);
  c.kv_subject = o.get(opt::nats_kv_subject);
  c.booking_subject = o.get(opt::nats_booking_subject);
  c.creds_file = o.get(opt::nats_creds);
  c.token = o.get(opt::nats_token);
  c.user = o.get(opt::nats_user);
  c.password = o.get(opt::nats_password);
  c.on_connection = std::move(on_connection);
  return c;
}

std::shared_ptr<discovery>
discovery_from(const runtime::options& o, const std::string& dir,
               std::function<void(bool)> on_connection) {
  const auto& kind = o.get(opt::discovery);
  if (kind == "memory")
    return std::make_shared<memory_discovery>();
  if (kind == "nats")
    return std::make_shared<nats_discovery>(
      nats_config_from(o, std::move(on_connection)));
  return std::make_shared<file_discovery>(dir, o.get(opt::discovery_ttl));
}

} // namespace outrider::cluster
