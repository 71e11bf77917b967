#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "runtime/metrics.hpp"

namespace outrider::runtime {

/// A certificate, its key and a CA: paths, or their PEM contents.
struct pem_set {
  std::string cert, key, ca;
  bool operator==(const pem_set&) const = default;
};

/// Why `pem` is no usable identity (OpenSSL cannot read the chain, the key
/// or the CA, or the key does not belong to the certificate); empty when it
/// is one.
std::string identity_problem(const pem_set& pem);

/// Reads the certificate files again every `interval` (a Kubernetes Secret
/// updates them by swapping a symlink): when their contents changed and
/// form a usable identity, `apply` gets them (on this watcher's thread) and
/// `outrider_tls_reloads_total{outcome="applied"}` counts it; a set that is
/// not usable (half written, a key of another certificate) changes nothing,
/// is counted as `refused` and logged once per content seen, and the files
/// are read again at the next turn. Connections and streams open keep the
/// certificate they began with. gRPC servers and channels reload the same
/// files themselves (cluster/tls.hpp); `apply` may be empty to only count
/// and log for them.
class tls_watch {
 public:
  tls_watch(pem_set paths, pem_set loaded, std::chrono::milliseconds interval,
            std::function<void(const pem_set&)> apply,
            metrics_registry& m = global_metrics());
  ~tls_watch();
  tls_watch(const tls_watch&) = delete;
  tls_watch& operator=(const tls_watch&) = delete;

  void stop();

 private:
  void run();
  void check();

  const pem_set paths_;
  pem_set current_; // what was applied last (or loaded at start)
  pem_set refused_; // the last contents refused (logged once)
  const std::chrono::milliseconds interval_;
  std::function<void(const pem_set&)> apply_;
  counter& applied_;
  counter& refused_count_;
  std::mutex mtx_;
  std::condition_variable wake_;
  bool stopping_ = false; // guarded by mtx_
  std::thread thread_;
};

} // namespace outrider::runtime
