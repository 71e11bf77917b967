// `outrider-sim --fleet N`: the workers' records, their cache churn, the
// server, until SIGINT or SIGTERM.
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <pthread.h>
#include <sys/resource.h>
#include <thread>

#include "cluster/discovery.hpp"
#include "cluster/nats_discovery.hpp"
#include "cluster/nats_kv_plane.hpp"
#include "runtime/errors.hpp"
#include "sim/fleet/fleet_server.hpp"
#include "sim/token_stream.hpp"

namespace outrider::sim {

namespace {

cluster::worker_record record_of(const fleet_state& fleet, size_t i) {
  const auto& cfg = fleet.cfg;
  const auto& id = fleet.workers[i]->id();
  cluster::worker_record r;
  r.worker_id = id;
  r.instance_id = id;
  r.model = cfg.model;
  r.relay_endpoint = fleet.endpoint_of(i);
  r.engine_endpoint = r.relay_endpoint;
  r.protocol = "openengine";
  r.kv_block_size = cfg.block_size;
  r.total_kv_blocks = cfg.blocks_per_worker;
  r.version = "outrider-sim fleet";
  return r;
}

// Each worker caches `blocks_per_batch` fresh blocks (a prompt no one will
// send) `batches_per_second` times a second, spread evenly over the
// workers, in 10 ms ticks; stops when `stop` is set.
void churn(fleet_state& f, const std::atomic<bool>& stop) {
  const auto& cfg = f.cfg;
  const auto tick = std::chrono::milliseconds{10};
  double owed = 0;
  size_t next = 0;
  uint64_t rng = cfg.seed;
  std::vector<uint32_t> prompt(size_t{cfg.blocks_per_batch} * cfg.block_size);
  auto at = std::chrono::steady_clock::now();
  while (!stop) {
    owed += cfg.batches_per_second * cfg.workers * 0.01;
    // Behind by more than a second's worth: that much is dropped (the
    // machine cannot keep the rate), never queued without bound.
    owed = std::min(owed, cfg.batches_per_second * cfg.workers);
    for (; owed >= 1 && !stop; owed -= 1) {
      for (auto& t : prompt)
        t = static_cast<uint32_t>(1 + (rng = splitmix(rng)) % 32000);
      f.workers[next]->run(prompt);
      next = (next + 1) % f.workers.size();
    }
    at += tick;
    std::this_thread::sleep_until(at);
    if (std::chrono::steady_clock::now() - at > std::chrono::seconds{1})
      at = std::chrono::steady_clock::now(); // no burst to catch up
  }
}

// A worker's batches on the NATS event plane, as a sidecar's publisher sends
// them (actors/sidecar/kv_publisher.cpp): epoch 1, as the fleet's relay
// answers snapshots; the position is the batch's sequence number.
class nats_sink final : public fleet_sink {
 public:
  nats_sink(cluster::nats_kv_plane& plane, std::string worker)
    : plane_(plane), worker_(std::move(worker)) {}
  bool push(kv_response_ptr batch) override {
    cluster::kv_plane_message m;
    m.worker_id = worker_;
    m.epoch = 1;
    m.position = batch->batch().sequence_number();
    m.batch = batch->batch().SerializeAsString();
    plane_.publish(m); // best effort, as a sidecar's
    return true;
  }

 private:
  cluster::nats_kv_plane& plane_;
  std::string worker_;
};

cluster::nats_config nats_of(const fleet_config& cfg) {
  cluster::nats_config c;
  c.urls = cluster::nats_urls(cfg.nats_url);
  return c;
}

// Each port is a listener and, once a router dials it, a connection: the
// soft descriptor limit is raised as far as the hard one allows for them.
bool descriptors_for(const fleet_config& cfg, std::string* why) {
  rlim_t need = 2 * rlim_t{cfg.ports} + 256;
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0)
    return true; // nothing known: let the listeners say
  if (lim.rlim_cur >= need)
    return true;
  auto raised = lim;
  raised.rlim_cur = std::min(need, lim.rlim_max);
  if (setrlimit(RLIMIT_NOFILE, &raised) == 0 && raised.rlim_cur >= need)
    return true;
  *why = "--ports " + std::to_string(cfg.ports) + " needs about " +
         std::to_string(need) + " descriptors; the limit is " +
         std::to_string(lim.rlim_max) + " (ulimit -n)";
  return false;
}

} // namespace

int run_fleet(const fleet_config& cfg) {
  // SIGINT and SIGTERM are waited for below; blocked before any thread
  // starts, so none of gRPC's takes them.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  auto fleet = std::make_unique<fleet_state>(cfg);
  if (cfg.shared_prefix_blocks > 0) {
    std::vector<uint32_t> system(size_t{cfg.shared_prefix_blocks} *
                                 cfg.block_size);
    for (size_t i = 0; i < system.size(); ++i)
      system[i] = static_cast<uint32_t>(1 + i);
    for (auto& w : fleet->workers)
      w->run(system);
  }
  std::vector<std::unique_ptr<grpc::Service>> services;
  std::string why;
  if (!descriptors_for(cfg, &why)) {
    std::fprintf(stderr, "outrider-sim: error: %s\n", why.c_str());
    return 1;
  }
  auto server = start_fleet_server(*fleet, services, &why);
  if (!server) {
    std::fprintf(stderr, "outrider-sim: error: %s\n", why.c_str());
    return 1;
  }
  // Records in the directory, or in NATS's bucket with the batches on the
  // NATS event plane too (the relay's SubscribeKvEvents still answers the
  // routers' snapshots).
  std::unique_ptr<cluster::discovery> disc;
  std::unique_ptr<cluster::nats_kv_plane> plane;
  std::vector<std::shared_ptr<nats_sink>> nats_sinks;
  if (cfg.nats_url.empty()) {
    disc = std::make_unique<cluster::file_discovery>(cfg.discovery_dir,
                                                     std::chrono::seconds{30});
  } else {
    disc = std::make_unique<cluster::nats_discovery>(nats_of(cfg));
    plane = std::make_unique<cluster::nats_kv_plane>(nats_of(cfg));
    if (auto err = plane->open()) {
      std::fprintf(stderr, "outrider-sim: error: %s\n", describe(err).c_str());
      return 1;
    }
    for (auto& w : fleet->workers) {
      nats_sinks.push_back(std::make_shared<nats_sink>(*plane, w->id()));
      w->follow(nats_sinks.back()); // held weakly there
    }
  }
  if (auto err = disc->open()) {
    std::fprintf(stderr, "outrider-sim: error: %s\n", describe(err).c_str());
    return 1;
  }
  for (size_t i = 0; i < fleet->workers.size(); ++i)
    if (auto err = disc->put(record_of(*fleet, i))) {
      std::fprintf(stderr, "outrider-sim: error: %s\n", describe(err).c_str());
      return 1;
    }
  std::printf("outrider-sim fleet: %u workers on %s:%u (%zu port(s)), "
              "records in %s\n",
              cfg.workers, cfg.host.c_str(), cfg.grpc_port, fleet->ports.size(),
              cfg.nats_url.empty() ? cfg.discovery_dir.c_str()
                                   : cfg.nats_url.c_str());
  std::fflush(stdout);

  std::atomic<bool> stop{false};
  std::thread churner;
  if (cfg.batches_per_second > 0)
    churner = std::thread([&] { churn(*fleet, stop); });
  // The records' leases every 3 s (a sidecar refreshes its own the same
  // way) and, on NATS, each worker's heartbeat every second (its last
  // position, as a sidecar's publisher repeats it): spread evenly over
  // 10 ms ticks, as independent sidecars' are, not all in one burst (on
  // NATS at 10,000 workers a burst is 10,000 JetStream writes at once).
  std::thread leases([&] {
    const size_t n = fleet->workers.size();
    double beats_owed = 0, leases_owed = 0;
    size_t next_beat = 0, next_lease = 0;
    auto at = std::chrono::steady_clock::now();
    while (!stop) {
      if (plane) {
        beats_owed = std::min(beats_owed + static_cast<double>(n) * 0.01,
                              static_cast<double>(n));
        for (; beats_owed >= 1 && !stop; beats_owed -= 1) {
          const auto& w = *fleet->workers[next_beat];
          next_beat = (next_beat + 1) % n;
          w.at_position([&](uint64_t position) {
            cluster::kv_plane_message hb;
            hb.worker_id = w.id();
            hb.epoch = 1;
            hb.position = position;
            hb.heartbeat = true;
            plane->publish(hb);
          });
        }
      }
      // Behind by more than a round (the machine cannot keep up): the
      // rest is dropped, never queued without bound.
      leases_owed = std::min(leases_owed + static_cast<double>(n) * 0.01 / 3,
                             static_cast<double>(n));
      for (; leases_owed >= 1 && !stop; leases_owed -= 1) {
        disc->keep_alive(fleet->workers[next_lease]->id());
        next_lease = (next_lease + 1) % n;
      }
      at += std::chrono::milliseconds{10};
      std::this_thread::sleep_until(at);
      if (std::chrono::steady_clock::now() - at > std::chrono::seconds{1})
        at = std::chrono::steady_clock::now(); // no burst to catch up
    }
  });
  int sig = 0;
  sigwait(&sigs, &sig);
  stop = true;
  if (churner.joinable())
    churner.join();
  leases.join();
  // Withdrawn within 5 s: a NATS server gone by now would hold each
  // delete for its timeout, ten thousand of them for hours. What is left
  // lapses with its lease.
  auto withdraw_by = std::chrono::steady_clock::now() + std::chrono::seconds{5};
  size_t withdrawn = 0;
  for (const auto& w : fleet->workers) {
    if (std::chrono::steady_clock::now() > withdraw_by)
      break;
    disc->remove(w->id());
    ++withdrawn;
  }
  if (withdrawn < fleet->workers.size())
    std::fprintf(stderr,
                 "outrider-sim fleet: %zu of %zu records not withdrawn "
                 "within 5 s; they lapse with their leases\n",
                 fleet->workers.size() - withdrawn, fleet->workers.size());
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds{2});
  uint64_t batches = 0;
  for (const auto& w : fleet->workers)
    batches += w->batches();
  std::printf("outrider-sim fleet: %llu requests, %llu tokens, %llu of %llu "
              "prompt blocks cached, %llu KV batches published\n",
              static_cast<unsigned long long>(fleet->requests.load()),
              static_cast<unsigned long long>(fleet->tokens.load()),
              static_cast<unsigned long long>(fleet->cached_blocks.load()),
              static_cast<unsigned long long>(fleet->prompt_blocks.load()),
              static_cast<unsigned long long>(batches));
  return 0;
}

} // namespace outrider::sim
