#include "cluster/nats_discovery.hpp"

#include <nats/nats.h>

namespace outrider::cluster {

using clock_type = std::chrono::steady_clock;

struct nats_discovery::impl {
  nats_link link;
  jsCtx* js = nullptr;
  std::mutex kv_mtx; // guards `kv` (re-made when the bucket is lost)
  kvStore* kv = nullptr;

  ~impl() {
    if (kv)
      kvStore_Destroy(kv);
    if (js)
      jsCtx_Destroy(js);
  }
};

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
  auto err = impl_->link.connect(cfg_, [this](bool up) {
    if (up) {
      // Leases did not run while we could not see keep-alives.
      std::lock_guard<std::mutex> guard{mtx_};
      for (auto& [id, k] : known_)
        k.lease = clock_type::now();
      ++changes_;
    }
    // The watcher is not made again here: NATS.c resets its ordered
    // consumer itself on a reconnect (from the next sequence), on a thread
    // of its own, and destroying the watcher meanwhile is a use-after-free
    // in NATS.c 3.4 (ASan saw it in kvWatcher_Destroy).
    connected_ = up;
    if (cfg_.on_connection)
      cfg_.on_connection(up);
  });
  if (err)
    return err;
  connected_ = impl_->link.connected();
  natsStatus s =
    natsConnection_JetStream(&impl_->js, impl_->link.get(), nullptr);
  if (s != NATS_OK)
    return nats_error("jetstream", s);
  if (connected_)
    ensure_bucket(); // else the first put or the watcher makes it
  return {};
}

void nats_discovery::start_watching() {
  std::call_once(watch_once_,
                 [this] { watcher_ = std::thread([this] { watch(); }); });
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
    if (r && r->worker_id == key) {
      auto now = clock_type::now();
      if (auto k = known_.find(key);
          k != known_.end() && k->second.record == *r) {
        // A lease refreshed, the record as it was: nothing for a watcher
        // to list again (as file discovery ignores a lease's touch). Ten
        // thousand workers refresh 3,300 times a second: each woke the
        // router's watcher into another listing of every record.
        k->second.lease = now;
        return;
      }
      known_[key] = {std::move(*r), now};
    } else {
      ++invalid_;
    }
  }
  ++changes_;
  changed_.notify_all();
}

// Follows the bucket: puts and deletes as they happen; re-made after a
// an error. Bounded waits, so that stopping is seen.
void nats_discovery::watch() {
  kvWatcher* w = nullptr;
  while (!stopping_) {
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
  start_watching();
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
    listed_ = changes_;
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
  start_watching();
  std::unique_lock<std::mutex> lock{mtx_};
  changed_.wait_for(lock, timeout, [this] {
    return stopping_.load() || changes_ != listed_ || woken_;
  });
  woken_ = false;
}

void nats_discovery::wake() {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    woken_ = true;
  }
  changed_.notify_all();
}

} // namespace outrider::cluster
