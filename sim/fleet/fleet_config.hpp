#pragma once

// `outrider-sim --fleet N`: N simulated workers in one process, for
// measuring a router at fleet size on one machine (docs/sim.md, "A
// fleet"). What it plays is set here; defaults beside their fields.

#include <cstdint>
#include <string>
#include <vector>

namespace outrider::sim {

struct fleet_config {
  uint32_t workers = 0;
  std::string host = "127.0.0.1";
  uint16_t grpc_port = 50051; // every worker's relay and engine endpoint
  /// Listening ports: worker i's endpoint is the (i mod ports)-th, the
  /// first `grpc_port`, the others free ones. As many as workers gives
  /// each worker an address of its own, so that a router holds a
  /// connection (and a channel) a worker, as in a real fleet; 1: every
  /// worker behind one address (one connection for the whole fleet).
  uint32_t ports = 1;
  /// Where the workers' records go (file discovery, as sidecars write them).
  std::string discovery_dir;
  /// NATS servers (comma-separated): the records go to NATS's bucket
  /// instead and every batch also to the NATS event plane, as sidecars run
  /// with `--discovery nats --event-plane nats`. Empty: no NATS.
  std::string nats_url;
  std::string model = "sim-model";
  std::string worker_prefix = "fleet-"; // worker i is <prefix><i>
  uint32_t block_size = 16;
  uint32_t blocks_per_worker = 1024; // each worker's GPU cache
  /// Blocks of one system prompt every worker holds from the start.
  uint32_t shared_prefix_blocks = 0;
  /// Synthetic cache churn: each worker caches this many fresh blocks (one
  /// prompt nobody will send) this often, evicting its oldest; 0: none.
  double batches_per_second = 0;
  uint32_t blocks_per_batch = 16;
  /// The shared engine core's speed: a prompt's first token after this much
  /// per uncached block, then one token per `token_ms` (0: at once).
  double prefill_ms_per_block = 0;
  double token_ms = 0;
  uint64_t seed = 1;
  /// Serve RelayMux (false: a stream per request only, as older relays).
  bool relay_mux = true;
};

struct fleet_parse_result {
  enum { ok, help, error } what = ok;
  std::string message; // the help text or the error
  fleet_config cfg;
};

/// Parses `outrider-sim --fleet N ...` (args without the program name).
fleet_parse_result parse_fleet_options(const std::vector<std::string>& args);

/// Runs the fleet until SIGINT or SIGTERM; the process's exit code.
int run_fleet(const fleet_config& cfg);

} // namespace outrider::sim
