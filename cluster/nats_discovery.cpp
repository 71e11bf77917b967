#include "cluster/nats_discovery.hpp"

#include <nats/nats.h>

namespace outrider::cluster {

using clock_type = std::chrono::steady_clock;

struct nats_discovery::impl {
  natsOptions* opts = nullptr;
  natsConnection* nc = nullptr;
  jsCtx* js = nullptr;
  std::mutex kv_mtx; // guards `kv` (re-made when the bucket is lost)
  kvStore* kv = nullptr;

  ~impl() {
    if (kv)
      kvStore_Destroy(kv);
    if (js)
      jsCtx_Destroy(js);
    if (nc) {
      natsConnection_Close(nc);
      natsConnection_Destroy(nc);
    }
    if (opts)
      natsOptions_Destroy(opts);
  }
};

namespace {

caf::error nats_error(const std::string& what, natsStatus s) {
  return make_error(errc::io_error,
                    "nats: " + what + ": " + natsStatus_GetText(s));
}

} // namespace

nats_discovery::nats_discovery(nats_config cfg)
  : cfg_(std::move(cfg)), impl_(std::make_unique<impl>()) {}

nats_discovery::~nats_discovery() {
  stopping_ = true;
  changed_.notify_all();
  if (watcher_.joinable())
    watcher_.join();
  impl_.reset();
}

caf::error nats_discovery::open() {
  natsStatus s = natsOptions_Create(&impl_->opts);
  if (s != NATS_OK)
    return nats_error("options", s);
  std::vector<const char*> urls;
  for (const auto& u : cfg_.urls)
    urls.push_back(u.c_str());
  s = natsOptions_SetServers(impl_->opts, urls.data(),
                             static_cast<int>(urls.size()));
  if (s != NATS_OK)
    return make_error(errc::invalid_argument,
                      std::string{"--nats-url: "} + natsStatus_GetText(s));
  if (!cfg_.creds_file.empty())
    s = natsOptions_SetUserCredentialsFromFiles(impl_->opts,
                                                cfg_.creds_file.c_str(), NULL);
  else if (!cfg_.token.empty())
    s = natsOptions_SetToken(impl_->opts, cfg_.token.c_str());
  else if (!cfg_.user.empty())
    s = natsOptions_SetUserInfo(impl_->opts, cfg_.user.c_str(),
                                cfg_.password.c_str());
  if (s != NATS_OK)
    return make_error(errc::invalid_argument,
                      std::string{"nats credentials: "} +
                        natsStatus_GetText(s));
  natsOptions_SetMaxReconnect(impl_->opts, -1); // for ever, with back-off
  natsOptions_SetReconnectWait(impl_->opts, 500);
  natsOptions_SetReconnectJitter(impl_->opts, 100, 1000);
  natsOptions_SetTimeout(impl_->opts, 2000);
  auto down = [](natsConnection*, void* self) {
    auto* d = static_cast<nats_discovery*>(self);
    d->connected_ = false;
    if (d->cfg_.on_connection)
      d->cfg_.on_connection(false);
  };
  auto up = [](natsConnection*, void* self) {
    auto* d = static_cast<nats_discovery*>(self);
    {
      // Leases did not run while we could not see keep-alives.
      std::lock_guard<std::mutex> guard{d->mtx_};
      for (auto& [id, k] : d->known_)
        k.lease = clock_type::now();
    }
    d->connected_ = true;
    d->rewatch_ = true;
    if (d->cfg_.on_connection)
      d->cfg_.on_connection(true);
  };
  natsOptions_SetDisconnectedCB(impl_->opts, down, this);
  natsOptions_SetReconnectedCB(impl_->opts, up, this);
  // Start even when no server answers yet: the first connect is retried
  // in the background like a reconnect.
  natsOptions_SetRetryOnFailedConnect(impl_->opts, true, up, this);
  s = natsConnection_Connect(&impl_->nc, impl_->opts);
  if (s == NATS_OK)
    connected_ = true;
  else if (s != NATS_NOT_YET_CONNECTED)
    return nats_error("connect", s);
  s = natsConnection_JetStream(&impl_->js, impl_->nc, nullptr);
  if (s != NATS_OK)
    return nats_error("jetstream", s);
  if (connected_)
    ensure_bucket(); // else the watcher makes it once connected
  watcher_ = std::thread([this] { watch(); });
  return {};
}

caf::error nats_discovery::ensure_bucket() {
  std::lock_guard<std::mutex> guard{impl_->kv_mtx};
  if (impl_->kv)
    return {};
  natsStatus s = js_KeyValue(&impl_->kv, impl_->js, cfg_.bucket.c_str());
  if (s == NATS_OK)
    return {};
  kvConfig kc;
  kvConfig_Init(&kc);
  kc.Bucket = cfg_.bucket.c_str();
  kc.History = 1;
  kc.MaxValueSize = static_cast<int32_t>(max_record_bytes);
  s = js_CreateKeyValue(&impl_->kv, impl_->js, &kc);
  if (s != NATS_OK) {
    impl_->kv = nullptr;
    return nats_error("bucket " + cfg_.bucket, s);
  }
  return {};
}

void nats_discovery::seen(const std::string& key, const std::string* value) {
  std::lock_guard<std::mutex> guard{mtx_};
  if (!value) {
    known_.erase(key);
  } else {
    std::string why;
    auto r = record_from_json(*value, &why);
    if (r && r->worker_id == key)
      known_[key] = {std::move(*r), clock_type::now()};
    else
      ++invalid_;
  }
  changed_.notify_all();
}

// Follows the bucket: puts and deletes as they happen; re-made after a
// reconnect or an error. Bounded waits, so that stopping is seen.
void nats_discovery::watch() {
  kvWatcher* w = nullptr;
  while (!stopping_) {
    if (rewatch_.exchange(false) && w) {
      kvWatcher_Destroy(w);
      w = nullptr;
    }
    if (!w) {
      kvStore* kv = nullptr;
      if (!ensure_bucket()) {
        std::lock_guard<std::mutex> guard{impl_->kv_mtx};
        kv = impl_->kv;
      }
      if (!kv || kvStore_WatchAll(&w, kv, nullptr) != NATS_OK) {
        w = nullptr;
        std::unique_lock<std::mutex> lock{mtx_};
        changed_.wait_for(lock, std::chrono::milliseconds{500},
                          [this] { return stopping_.load(); });
        continue;
      }
    }
    kvEntry* e = nullptr;
    natsStatus s = kvWatcher_Next(&e, w, 200);
    if (s == NATS_TIMEOUT)
      continue;
    if (s != NATS_OK) {
      kvWatcher_Destroy(w);
      w = nullptr;
      continue;
    }
    if (!e)
      continue; // the end of the initial values
    std::string key = kvEntry_Key(e);
    if (kvEntry_Operation(e) == kvOp_Put) {
      std::string value = kvEntry_ValueString(e);
      seen(key, &value);
    } else {
      seen(key, nullptr);
    }
    kvEntry_Destroy(e);
  }
  if (w)
    kvWatcher_Destroy(w);
}

caf::error nats_discovery::put(const worker_record& r) {
  if (r.worker_id.empty() ||
      r.worker_id.find_first_not_of(
        "abcdefghijklmnopqrstuvwxyz"
        "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") != std::string::npos)
    return make_error(errc::invalid_argument,
                      "worker id '" + r.worker_id +
                        "' is not a NATS key (letters, digits, - and _)");
  {
    std::lock_guard<std::mutex> guard{mtx_};
    mine_[r.worker_id] = r;
  }
  if (auto err = ensure_bucket())
    return err;
  std::lock_guard<std::mutex> guard{impl_->kv_mtx};
  uint64_t rev = 0;
  natsStatus s =
    kvStore_PutString(&rev, impl_->kv, r.worker_id.c_str(), to_json(r).c_str());
  if (s == NATS_NOT_FOUND || s == NATS_NO_RESPONDERS) {
    // The bucket is gone (a server that lost its storage): make it again
    // on the next try.
    kvStore_Destroy(impl_->kv);
    impl_->kv = nullptr;
  }
  return s == NATS_OK ? caf::error{} : nats_error("put " + r.worker_id, s);
}

caf::error nats_discovery::keep_alive(const std::string& worker_id) {
  worker_record r;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    auto m = mine_.find(worker_id);
    if (m == mine_.end())
      return make_error(errc::io_error, "nats: " + worker_id +
                                          " was never put by this process");
    r = m->second;
  }
  return put(r);
}

caf::error nats_discovery::remove(const std::string& worker_id) {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    mine_.erase(worker_id);
  }
  if (auto err = ensure_bucket())
    return err;
  std::lock_guard<std::mutex> guard{impl_->kv_mtx};
  natsStatus s = kvStore_Delete(impl_->kv, worker_id.c_str());
  return s == NATS_OK || s == NATS_NOT_FOUND
           ? caf::error{}
           : nats_error("delete " + worker_id, s);
}

std::vector<worker_record> nats_discovery::list(size_t* invalid) {
  std::vector<worker_record> out;
  std::vector<std::string> stale;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    auto now = clock_type::now();
    for (auto& [id, k] : known_) {
      if (connected_ && now - k.lease > cfg_.ttl)
        stale.push_back(id); // no keep-alive within the TTL
      else
        out.push_back(k.record);
    }
    for (const auto& id : stale)
      known_.erase(id);
    if (invalid)
      *invalid = invalid_; // since the last list, as file_discovery counts
    invalid_ = 0;
  }
  // Expired by the watchers themselves (server 2.9 tells nobody).
  for (const auto& id : stale) {
    std::lock_guard<std::mutex> guard{impl_->kv_mtx};
    if (impl_->kv)
      kvStore_Delete(impl_->kv, id.c_str());
  }
  return out;
}

void nats_discovery::wait_for_change(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock{mtx_};
  changed_.wait_for(lock, timeout);
}

} // namespace outrider::cluster
