// `outrider-sim --fleet N`'s options: one table, parsed by the runtime's
// flag layer like outrider-sim's own (sim/sim_options.cpp).
#include <cstdio>

#include "runtime/options.hpp"
#include "sim/fleet/fleet_config.hpp"

namespace outrider::sim {

namespace {

using runtime::option_key;
using runtime::option_spec;
using ot = runtime::option_type;

namespace key {
constexpr option_key<int64_t> fleet{"fleet"};
constexpr option_key<std::string> host{"host"};
constexpr option_key<int64_t> grpc_port{"grpc-port"};
constexpr option_key<int64_t> ports{"ports"};
constexpr option_key<std::string> discovery_dir{"discovery-dir"};
constexpr option_key<std::string> nats_url{"nats-url"};
constexpr option_key<std::string> model{"served-model-name"};
constexpr option_key<std::string> prefix{"worker-id-prefix"};
constexpr option_key<int64_t> block_size{"block-size"};
constexpr option_key<int64_t> blocks{"num-gpu-blocks-override"};
constexpr option_key<int64_t> shared{"shared-prefix-blocks"};
constexpr option_key<double> rate{"kv-batches-per-second"};
constexpr option_key<int64_t> per_batch{"kv-blocks-per-batch"};
constexpr option_key<double> prefill_ms{"prefill-ms-per-block"};
constexpr option_key<double> token_ms{"token-ms"};
constexpr option_key<int64_t> seed{"seed"};
constexpr option_key<bool> relay_mux{"relay-mux"};
} // namespace key

option_spec integer(const char* name, uint64_t def, std::string help,
                    std::string example, int64_t min, int64_t max) {
  option_spec s;
  s.key = name;
  s.type = ot::integer;
  s.default_value = std::to_string(def);
  s.help = std::move(help);
  s.example = std::move(example);
  s.min = min;
  s.max = max;
  return s;
}

option_spec number(const char* name, double def, std::string help,
                   std::string example, double highest) {
  option_spec s;
  s.key = name;
  s.type = ot::number;
  char text[32];
  std::snprintf(text, sizeof(text), "%g", def);
  s.default_value = text;
  s.help = std::move(help);
  s.example = std::move(example);
  s.lowest = 0;
  s.highest = highest;
  return s;
}

option_spec text(const char* name, std::string def, std::string help,
                 std::string example) {
  option_spec s;
  s.key = name;
  s.type = ot::string;
  s.default_value = std::move(def);
  s.help = std::move(help);
  s.example = std::move(example);
  return s;
}

option_spec boolean(const char* name, bool def, std::string help,
                    std::string example) {
  option_spec s;
  s.key = name;
  s.type = ot::boolean;
  s.default_value = def ? "true" : "false";
  s.help = std::move(help);
  s.example = std::move(example);
  return s;
}

// The defaults are fleet_config's, so the help cannot drift from what runs.
const std::vector<option_spec>& fleet_specs() {
  static const std::vector<option_spec> specs = [] {
    const fleet_config c;
    return std::vector<option_spec>{
      integer("fleet", 0, "simulated workers in this process", "--fleet 1000",
              1, 100000),
      text("host", c.host, "address to listen on", "--host 127.0.0.1"),
      integer("grpc-port", c.grpc_port,
              "the one gRPC port every worker's relay answers on (each call "
              "names its worker: x-outrider-worker)",
              "--grpc-port 50052", 1, 65535),
      integer("ports", c.ports,
              "listening ports: worker i's relay answers on the (i mod N)-th, "
              "the first --grpc-port, the others free ones; as many as "
              "--fleet gives each worker an address of its own, so a router "
              "holds one connection a worker as in a real fleet (each port "
              "takes two descriptors)",
              "--ports 5000", 1, 30000),
      text("discovery-dir", "",
           "where the workers' records are written (file discovery, as "
           "sidecars write them; required unless --nats-url)",
           "--discovery-dir /tmp/fleet"),
      text("nats-url", "",
           "NATS servers, comma-separated: the records go to NATS's bucket "
           "instead of --discovery-dir and every KV batch (and a heartbeat "
           "a second) to the NATS event plane as well, as sidecars with "
           "--discovery nats --event-plane nats",
           "--nats-url nats://127.0.0.1:4222"),
      text("served-model-name", c.model, "model name",
           "--served-model-name llama"),
      text("worker-id-prefix", c.worker_prefix, "worker i is named <prefix><i>",
           "--worker-id-prefix rack1-"),
      integer("block-size", c.block_size, "tokens per KV block",
              "--block-size 64", 1, 4096),
      integer("num-gpu-blocks-override", c.blocks_per_worker,
              "KV blocks per worker (least recently used evicted)",
              "--num-gpu-blocks-override 4096", 1, 10000000),
      integer("shared-prefix-blocks", c.shared_prefix_blocks,
              "blocks of one system prompt (tokens 1, 2, ...) every worker "
              "holds from the start",
              "--shared-prefix-blocks 32", 0, 100000),
      number("kv-batches-per-second", c.batches_per_second,
             "cache churn: KV batches each worker publishes per second, each "
             "storing fresh blocks and evicting its oldest (0: only what "
             "requests cache)",
             "--kv-batches-per-second 20", 1000),
      integer("kv-blocks-per-batch", c.blocks_per_batch,
              "fresh blocks in each churn batch", "--kv-blocks-per-batch 16", 1,
              4096),
      number("prefill-ms-per-block", c.prefill_ms_per_block,
             "the shared engine core: time to first token per uncached "
             "prompt block",
             "--prefill-ms-per-block 0.5", 60000),
      number("token-ms", c.token_ms,
             "the shared engine core: time per generated token (0: as fast "
             "as the stream goes)",
             "--token-ms 20", 60000),
      integer("seed", c.seed, "the churn's token ids", "--seed 7", 0,
              INT64_MAX),
      boolean("relay-mux", c.relay_mux,
              "serve RelayMux (many requests on one stream, as sidecars "
              "do); false: a stream per request only, as older relays",
              "--relay-mux false"),
    };
  }();
  return specs;
}

std::string help_text() {
  return "outrider-sim --fleet N: N simulated workers in one process, each "
         "with its own\nKV cache, record and event stream, answering "
         "OpenEngine Generate, GetLoad,\nSubscribeKvEvents and RelayMux on one "
         "port "
         "from one engine core (docs/sim.md, \"A fleet\").\n\nOptions:\n" +
         runtime::option_list_text(fleet_specs(), false) +
         "  -h, --help     this text\n";
}

} // namespace

fleet_parse_result parse_fleet_options(const std::vector<std::string>& args) {
  fleet_parse_result out;
  auto parsed = runtime::parse_flags(fleet_specs(), args);
  switch (parsed.what) {
  case runtime::parse_outcome::help:
    out.what = fleet_parse_result::help;
    out.message = help_text();
    return out;
  case runtime::parse_outcome::version:
  case runtime::parse_outcome::error:
    out.what = fleet_parse_result::error;
    out.message = parsed.what == runtime::parse_outcome::error
                    ? parsed.message
                    : "outrider-sim has no --version";
    return out;
  case runtime::parse_outcome::ok:
    break;
  }
  const auto& o = parsed.opts;
  auto& c = out.cfg;
  c.workers = static_cast<uint32_t>(o.get(key::fleet));
  c.host = o.get(key::host);
  c.grpc_port = static_cast<uint16_t>(o.get(key::grpc_port));
  c.ports = static_cast<uint32_t>(o.get(key::ports));
  c.discovery_dir = o.get(key::discovery_dir);
  c.nats_url = o.get(key::nats_url);
  c.model = o.get(key::model);
  c.worker_prefix = o.get(key::prefix);
  c.block_size = static_cast<uint32_t>(o.get(key::block_size));
  c.blocks_per_worker = static_cast<uint32_t>(o.get(key::blocks));
  c.shared_prefix_blocks = static_cast<uint32_t>(o.get(key::shared));
  c.batches_per_second = o.get(key::rate);
  c.blocks_per_batch = static_cast<uint32_t>(o.get(key::per_batch));
  c.prefill_ms_per_block = o.get(key::prefill_ms);
  c.token_ms = o.get(key::token_ms);
  c.seed = static_cast<uint64_t>(o.get(key::seed));
  c.relay_mux = o.get(key::relay_mux);
  if (c.workers == 0 || (c.discovery_dir.empty() && c.nats_url.empty())) {
    out.what = fleet_parse_result::error;
    out.message =
      "--fleet N (at least 1) and --discovery-dir (or --nats-url) are required";
  } else if (c.shared_prefix_blocks + c.blocks_per_batch >
             c.blocks_per_worker) {
    out.what = fleet_parse_result::error;
    out.message = "--shared-prefix-blocks plus --kv-blocks-per-batch must fit "
                  "in --num-gpu-blocks-override";
  }
  return out;
}

} // namespace outrider::sim
