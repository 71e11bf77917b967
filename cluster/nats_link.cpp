#include "cluster/nats_link.hpp"

#include <nats/nats.h>
#include <sstream>

namespace outrider::cluster {

std::vector<std::string> nats_urls(const std::string& comma_separated) {
  std::vector<std::string> out;
  std::istringstream in{comma_separated};
  for (std::string url; std::getline(in, url, ',');)
    if (!url.empty())
      out.push_back(url);
  return out;
}

caf::error nats_error(const std::string& what, int status) {
  return make_error(errc::io_error,
                    "nats: " + what + ": " +
                      natsStatus_GetText(static_cast<natsStatus>(status)));
}

nats_link::~nats_link() {
  for (auto& s : subs_) {
    natsSubscription_Unsubscribe(s.sub);
    natsSubscription_Destroy(s.sub);
  }
  if (nc_) {
    natsConnection_Close(nc_);
    natsConnection_Destroy(nc_);
  }
  if (opts_)
    natsOptions_Destroy(opts_);
}

caf::error nats_link::subscribe(const std::string& subject,
                                std::function<void(natsMsg*)> on_msg,
                                int pending_messages) {
  auto& s = subs_.emplace_back();
  s.on_msg = std::move(on_msg);
  auto deliver = [](natsConnection*, natsSubscription*, natsMsg* msg,
                    void* entry) {
    static_cast<subscription*>(entry)->on_msg(msg);
    natsMsg_Destroy(msg);
  };
  natsStatus st =
    natsConnection_Subscribe(&s.sub, nc_, subject.c_str(), deliver, &s);
  if (st != NATS_OK) {
    subs_.pop_back();
    return nats_error("subscribe " + subject, st);
  }
  if (pending_messages > 0) // bytes: up to 2.5 KiB a message on average
    natsSubscription_SetPendingLimits(s.sub, pending_messages,
                                      pending_messages * 2560);
  // A no-op while not yet connected: NATS.c sends it on connect.
  if (connected_)
    natsConnection_FlushTimeout(nc_, 2000);
  return {};
}

void nats_link::on_down(natsConnection*, void* self) {
  auto* l = static_cast<nats_link*>(self);
  l->connected_ = false;
  if (l->on_connection_)
    l->on_connection_(false);
}

void nats_link::on_up(natsConnection*, void* self) {
  auto* l = static_cast<nats_link*>(self);
  l->connected_ = true;
  if (l->on_connection_)
    l->on_connection_(true);
}

caf::error nats_link::connect(const nats_config& cfg,
                              std::function<void(bool)> on_connection) {
  on_connection_ = std::move(on_connection);
  natsStatus s = natsOptions_Create(&opts_);
  if (s != NATS_OK)
    return nats_error("options", s);
  std::vector<const char*> urls;
  for (const auto& u : cfg.urls)
    urls.push_back(u.c_str());
  s = natsOptions_SetServers(opts_, urls.data(), static_cast<int>(urls.size()));
  if (s != NATS_OK)
    return make_error(errc::invalid_argument,
                      std::string{"--nats-url: "} + natsStatus_GetText(s));
  if (!cfg.creds_file.empty())
    s = natsOptions_SetUserCredentialsFromFiles(opts_, cfg.creds_file.c_str(),
                                                NULL);
  else if (!cfg.token.empty())
    s = natsOptions_SetToken(opts_, cfg.token.c_str());
  else if (!cfg.user.empty())
    s = natsOptions_SetUserInfo(opts_, cfg.user.c_str(), cfg.password.c_str());
  if (s != NATS_OK) // never the secret itself in the message
    return make_error(errc::invalid_argument,
                      std::string{"nats credentials: "} +
                        natsStatus_GetText(s));
  natsOptions_SetMaxReconnect(opts_, -1); // for ever, with back-off
  natsOptions_SetReconnectWait(opts_, 500);
  natsOptions_SetReconnectJitter(opts_, 100, 1000);
  natsOptions_SetTimeout(opts_, 2000);
  natsOptions_SetDisconnectedCB(opts_, &nats_link::on_down, this);
  natsOptions_SetReconnectedCB(opts_, &nats_link::on_up, this);
  natsOptions_SetRetryOnFailedConnect(opts_, true, &nats_link::on_up, this);
  s = natsConnection_Connect(&nc_, opts_);
  if (s == NATS_OK)
    connected_ = true;
  else if (s != NATS_NOT_YET_CONNECTED)
    return nats_error("connect", s);
  return {};
}

} // namespace outrider::cluster
