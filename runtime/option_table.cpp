// The one table of outrider's options: flag, YAML key and OUTRIDER_*
// variable, type, default, range, help with an example. The typed keys in
// option_keys.hpp follow it (checked by a unit test).
#include "runtime/option_table_parts.hpp"

namespace outrider::runtime {

option_spec make_option(std::string key, option_type type, std::string def,
                        std::string help, std::string example,
                        std::vector<std::string> choices, int64_t min,
                        int64_t max, bool hidden) {
  return option_spec{std::move(key),
                     type,
                     std::move(def),
                     std::move(help),
                     std::move(example),
                     std::move(choices),
                     min,
                     max,
                     hidden};
}

namespace {

using ot = option_type;

std::vector<option_spec> make_specs() {
  std::vector<option_spec> specs{
    make_option("role", ot::string, "", "which part to run", "--role sidecar",
                {"sidecar", "router", "all"}),
    make_option("config", ot::string, "", "YAML file with any of these keys",
                "--config cluster.yaml"),
    make_option(
      "system-host", ot::string, "127.0.0.1",
      "address of the status server (/live, /ready, /health, /metrics)",
      "--system-host 0.0.0.0"),
    make_option("system-port", ot::integer, "9090",
                "port of the status server (0: any)", "--system-port 9091", {},
                0, 65535),
    make_option("log-level", ot::string, "info",
                "least severe log level printed", "--log-level debug",
                {"trace", "debug", "info", "warn", "error", "off"}),
    make_option("log-format", ot::string, "text", "log line format",
                "--log-format json", {"text", "json"}),
    make_option("scheduler-threads", ot::integer, "0",
                "actor scheduler threads (0: one per core)",
                "--scheduler-threads 2", {}, 0, 256),
    make_option("shutdown-timeout", ot::duration, "5s",
                "after SIGTERM, exit anyway once this has passed",
                "--shutdown-timeout 2s"),
    make_option("supervisor-initial-backoff", ot::duration, "100ms",
                "first delay before restarting a failed actor",
                "--supervisor-initial-backoff 50ms"),
    make_option("supervisor-max-backoff", ot::duration, "10s",
                "the restart delay doubles up to this",
                "--supervisor-max-backoff 30s"),
    make_option("supervisor-stable-period", ot::duration, "30s",
                "an actor up this long gets the initial delay again",
                "--supervisor-stable-period 1m"),
    make_option("supervisor-max-restarts", ot::integer, "5",
                "restarts within the window before the supervisor gives up",
                "--supervisor-max-restarts 10", {}, 1, 1000),
    make_option("supervisor-restart-window", ot::duration, "60s",
                "window for --supervisor-max-restarts",
                "--supervisor-restart-window 5m"),
    make_option("engine-endpoint", ot::string, "127.0.0.1:50051",
                "the engine's gRPC address (sidecar)",
                "--engine-endpoint 127.0.0.1:50051"),
    make_option(
      "engine-protocol", ot::string, "auto",
      "the engine's gRPC dialect (auto: detected once from the services "
      "the engine offers: OpenEngine, else vLLM, else SGLang)",
      "--engine-protocol vllm", {"auto", "openengine", "vllm", "sglang"}),
    make_option(
      "engine-http", ot::string, "",
      "the engine's HTTP address (host:port): KV event sources are read "
      "from its GET /kv_event_sources (vLLM) where its gRPC lists none "
      "or has no GetKvEventSources (sidecar; empty: gRPC only)",
      "--engine-http 127.0.0.1:8000"),
    make_option(
      "engine-http-endpoint", ot::string, "",
      "the engine's OpenAI HTTP server as a gateway reaches it (host:port "
      "of rank 0; rank r on port + r), advertised in the worker's record "
      "for the router's endpoint picker (sidecar; empty: --engine-http, "
      "else the engine's host and vLLM's port 8000)",
      "--engine-http-endpoint 10.0.0.7:8000"),
    make_option(
      "on-kv-gap", ot::string, "reset",
      "when the engine's replay cannot cover a gap: reset the rank, or "
      "also shut the engine down (vLLM) so it restarts clean",
      "--on-kv-gap shutdown-engine", {"reset", "shutdown-engine"}),
    make_option(
      "kv-max-message-bytes", ot::integer, "16777216",
      "sidecar: largest KV event payload taken from the engine: a larger "
      "live one is refused and counted, a larger replay answer is "
      "dropped by ZeroMQ before it is read",
      "--kv-max-message-bytes 4194304", {}, 4096, 1073741824),
    make_option(
      "kv-max-batch-events", ot::integer, "65536",
      "sidecar: most events one KV batch may carry; a larger batch is "
      "rejected whole and counted",
      "--kv-max-batch-events 10000", {}, 1, 4194304),
    make_option("data-dir", ot::string, "./outrider-data",
                "sidecar: where the KV index lives (RocksDB)",
                "--data-dir /var/lib/outrider"),
    make_option(
      "discovery", ot::string, "file",
      "where workers are registered: file (one host), nats (a fleet: a "
      "JetStream key-value bucket), memory (tests)",
      "--discovery nats", {"file", "nats", "memory"}),
    make_option(
      "check-config", ot::boolean, "false",
      "validate the options (flags, OUTRIDER_* variables, --config) and "
      "exit: 0 and the settings that differ from the defaults when "
      "valid, 2 and the reason when not; opens no file and no socket",
      "outrider --config fleet-router.yaml --check-config"),
  };
  // The fleet: event plane, NATS, discovery (option_table_fleet.cpp).
  for (auto& o : fleet_option_specs())
    specs.push_back(std::move(o));
  std::vector<option_spec> roles{
    make_option("worker-id", ot::string, "",
                "this worker's name in discovery (default: host-enginePort)",
                "--worker-id gpu0-vllm"),
    make_option("relay-host", ot::string, "127.0.0.1",
                "the sidecar's OpenEngine relay for routers: address",
                "--relay-host 10.0.0.5"),
    make_option("relay-advertise-host", ot::string, "",
                "the relay's address as routers are told it (default: "
                "--relay-host, or this host's name when that is a wildcard; in "
                "Kubernetes: the pod IP)",
                "OUTRIDER_RELAY_ADVERTISE_HOST=$(POD_IP)"),
    make_option("relay-port", ot::integer, "9100",
                "the sidecar's OpenEngine relay for routers: port (0: any, and "
                "that one is advertised)",
                "--relay-port 9101", {}, 0, 65535),
    make_option(
      "tls-cert", ot::string, "",
      "TLS for the relay, the routers' calls to it and the router's gRPC "
      "frontend: this process's certificate chain (PEM; with --tls-key)",
      "--tls-cert /etc/outrider/tls/tls.crt"),
    make_option("tls-key", ot::string, "",
                "TLS: the private key of --tls-cert (PEM)",
                "--tls-key /etc/outrider/tls/tls.key"),
    make_option(
      "tls-ca", ot::string, "",
      "TLS: the CA that signs peers' certificates (PEM); with it, servers "
      "require client certificates (mutual TLS) and clients verify "
      "servers against it (default: the system's roots)",
      "--tls-ca /etc/outrider/tls/ca.crt"),
    make_option(
      "tls-reload-interval", ot::duration, "10s",
      "TLS: how often the --tls-* files are read again (a Secret's symlink "
      "swap); what changed serves new connections, those open keep theirs; "
      "files that do not form a usable certificate and key change nothing "
      "(logged, counted); 0: read once at start",
      "--tls-reload-interval 1m"),
    make_option(
      "http-tls", ot::boolean, "false",
      "router: serve the HTTP frontend over TLS with --tls-cert and "
      "--tls-key; with --tls-ca clients must present a certificate it "
      "signed (the status server stays plaintext for probes)",
      "--http-tls"),
    make_option(
      "tls-server-name", ot::string, "",
      "router: the name sidecars' certificates must carry (default: the "
      "address dialled): one certificate for a fleet whose relays are "
      "reached at pod IPs",
      "--tls-server-name outrider-worker"),
    make_option("relay-max-streams", ot::integer, "10000",
                "sidecar: Generate streams the relay carries at once; beyond: "
                "RESOURCE_EXHAUSTED",
                "--relay-max-streams 2000", {}, 1, 1000000),
    make_option(
      "relay-grace", ot::duration, "1s",
      "sidecar: after SIGTERM, how long relayed streams may run on (within "
      "--shutdown-timeout); requests opened meanwhile are refused, routers "
      "place them elsewhere; streams still running then are cut and routers "
      "move them to another worker, tokens kept",
      "--relay-grace 20s"),
    make_option(
      "engine-metrics-url", ot::string, "",
      "sidecar: the engine's Prometheus endpoint (http://host:port/path; "
      "auto: the engine's HTTP endpoint's /metrics), re-exported on the "
      "sidecar's /metrics with outrider_worker; empty: off",
      "--engine-metrics-url auto"),
    make_option("engine-metrics-interval", ot::duration, "5s",
                "sidecar: how often the engine's metrics are scraped and its "
                "load asked (a "
                "scrape older than three intervals is not re-exported)",
                "--engine-metrics-interval 15s"),
    make_option("engine-startup-deadline", ot::duration, "10m",
                "sidecar: give up if the engine is not SERVING by then",
                "--engine-startup-deadline 15m"),
    make_option("http-host", ot::string, "127.0.0.1",
                "router: address of the OpenAI-compatible frontend",
                "--http-host 0.0.0.0"),
    make_option("http-port", ot::integer, "8000",
                "router: port of the frontend", "--http-port 8080", {}, 0,
                65535),
    make_option(
      "http-io-threads", ot::integer, "2",
      "router: I/O threads of the frontend (they serve every connection)",
      "--http-io-threads 4", {}, 1, 64),
    make_option(
      "http-max-connections", ot::integer, "10000",
      "router: open frontend connections; beyond: 503 with Retry-After",
      "--http-max-connections 50000", {}, 1, 1000000),
    make_option("http-max-in-flight", ot::integer, "10000",
                "router: requests generating at once (none holds a thread); "
                "beyond: 429 with Retry-After",
                "--http-max-in-flight 20000", {}, 1, 1000000),
    make_option("http-max-header-bytes", ot::integer, "16384",
                "router: request line and headers of one request (431 beyond)",
                "--http-max-header-bytes 32768", {}, 1024, 1 << 20),
    make_option("http-max-headers", ot::integer, "100",
                "router: header fields of one request (431 beyond)",
                "--http-max-headers 50", {}, 1, 10000),
    make_option("http-max-body-bytes", ot::integer, "16777216",
                "router: request body, after chunked decoding (413 beyond)",
                "--http-max-body-bytes 4194304", {}, 1024, int64_t{1} << 32),
    make_option(
      "http-body-budget-bytes", ot::integer, "268435456",
      "router: request bodies being read or parsed, all connections "
      "together (a body counts its Content-Length, chunked: the body limit); "
      "beyond: 503 with Retry-After before the body is read; 0: unbounded",
      "--http-body-budget-bytes 1073741824", {}, 0, int64_t{1} << 40),
    make_option(
      "http-max-json-depth", ot::integer, "8",
      "router: nesting of a request's JSON (the API needs 3; 400 beyond)",
      "--http-max-json-depth 16", {}, 3, 1000),
    make_option("max-prompt-tokens", ot::integer, "1000000",
                "router: tokens of one prompt (400 beyond)",
                "--max-prompt-tokens 131072", {}, 1, 100000000),
    make_option("http-read-timeout", ot::duration, "10s",
                "router: from a request's first byte to its last (408 beyond)",
                "--http-read-timeout 30s"),
    make_option("http-idle-timeout", ot::duration, "60s",
                "router: a kept-alive connection waiting for its next request",
                "--http-idle-timeout 5s"),
    make_option(
      "http-send-timeout", ot::duration, "30s",
      "router: a response write making no progress (e.g. an SSE reader "
      "or a gRPC client that stopped reading) ends the request",
      "--http-send-timeout 10s"),
    make_option("grpc-port", ot::integer, "8001",
                "router: port of the OpenEngine Inference frontend (0: off)",
                "--grpc-port 8001", {}, 0, 65535),
    make_option("epp-port", ot::integer, "0",
                "router: port of the endpoint picker for Kubernetes "
                "inference gateways (Envoy ext_proc, Gateway API Inference "
                "Extension protocol v1.0.0; 0: off)",
                "--epp-port 9002", {}, 0, 65535),
    make_option("epp-body-mode", ot::string, "buffered",
                "router: how the gateway's ext_proc filter sends request "
                "bodies (its request_body_mode): buffered, or streamed "
                "(STREAMED with send_body_without_waiting_for_header_"
                "response: the endpoint goes on the headers' answer once "
                "the body is whole)",
                "--epp-body-mode streamed", {"buffered", "streamed"}),
    make_option("grpc-max-streams", ot::integer, "10000",
                "router: Generate streams the gRPC frontend carries at once; "
                "beyond: RESOURCE_EXHAUSTED",
                "--grpc-max-streams 20000", {}, 1, 1000000),
    make_option(
      "grpc-idle-timeout", ot::duration, "5m",
      "router and sidecar: a gRPC connection (the router's --grpc-port, a "
      "sidecar's relay) with no call in progress for this long is closed; "
      "one that has not finished its handshake in 10 s is dropped",
      "--grpc-idle-timeout 1m"),
    make_option(
      "grpc-memory-quota", ot::integer, "1073741824",
      "router and sidecar: bytes of memory each gRPC server (the router's "
      "--grpc-port and --epp-port, a sidecar's relay) may use for its "
      "connections and calls; near it, gRPC closes idle connections and "
      "new ones (an idle one holds about 14 KB); 0: unbounded",
      "--grpc-memory-quota 268435456", {}, 0, 1099511627776),
    make_option(
      "grpc-fd-reserve", ot::integer, "64",
      "router and sidecar: the process's last file descriptors a connection "
      "to a plaintext gRPC listener (--grpc-port, --epp-port, a relay) may "
      "not take; such listeners accept on outrider's own loop, which closes "
      "connections past the reserve, backs off when accept fails, and "
      "drops connections silent for 10 s; 0: gRPC's own listener (as with "
      "TLS, which has none of that; the listener probe covers it)",
      "--grpc-fd-reserve 256", {}, 0, 65536),
    make_option(
      "listener-probe-interval", ot::duration, "5s",
      "router and sidecar: how often each gRPC listener is probed from a "
      "fresh connection; one that stops accepting (two probes in a row) "
      "makes /ready 503 (a sidecar withdraws its worker) and is rebuilt "
      "on the same port after a third; 0: not probed",
      "--listener-probe-interval 10s"),
    make_option(
      "otlp-endpoint", ot::string, "",
      "router and sidecar: where spans go, OTLP over HTTP "
      "(http://host:port[/path], the path by default /v1/traces); empty: "
      "nothing is recorded, a client's traceparent still reaches the "
      "engines",
      "--otlp-endpoint http://127.0.0.1:4318"),
    make_option(
      "trace-sample-ratio", ot::number, "0",
      "router: the share of requests without a sampled traceparent that "
      "start a recorded trace (0 to 1); a client's sampled flag decides "
      "for its own",
      "--trace-sample-ratio 0.01"),
    make_option(
      "request-timeout", ot::duration, "30m",
      "router: a request's whole time; every engine call it makes has "
      "this deadline (504 beyond)",
      "--request-timeout 10m"),
    make_option(
      "dispatch", ot::string, "mux",
      "router: through the sidecar relays on one multiplexed stream per "
      "relay (mux: the tokens of many requests share messages; relays "
      "without it get a stream per request), through each worker's sidecar "
      "relay with a stream per request (relay), or straight to each "
      "worker's engine (OpenEngine, vLLM or SGLang native)",
      "--dispatch relay", {"mux", "relay", "direct"}),
  };
  for (auto& o : roles)
    specs.push_back(std::move(o));
  // Where requests go (option_table_routing.cpp), before the text options.
  for (auto& o : routing_option_specs())
    specs.push_back(std::move(o));
  std::vector<option_spec> text{
    make_option(
      "tokenizer", ot::string, "",
      "router: the model's folder with tokenizer.json (and "
      "tokenizer_config.json), or GPT-2's encoder.json + vocab.bpe: text "
      "prompts, stop strings and text out",
      "--tokenizer /models/Qwen3-8B"),
    make_option("chat-template", ot::string, "",
                "router: a Jinja chat template file for /v1/chat/completions "
                "(default: the tokenizer's own)",
                "--chat-template /etc/outrider/chatml.jinja"),
    make_option(
      "chat-media-placeholder", ot::string, "<|image_pad|>",
      "router: the text a chat's image part becomes for the template "
      "(the model's image token); the prompt is matched against the KV "
      "index only before the first",
      "--chat-media-placeholder \"<image>\""),
    make_option("tokenizer-threads", ot::integer, "2",
                "router: threads that tokenize prompts (never the I/O threads)",
                "--tokenizer-threads 4", {}, 1, 64),
    make_option("served-model", ot::string, "",
                "router: the model to serve (default: the workers')",
                "--served-model llama-3-8b"),
    make_option("sim-engines", ot::integer, "2",
                "role all: simulated engines to start (each with a sidecar)",
                "--sim-engines 4", {}, 1, 64),
    make_option("sim-binary", ot::string, "",
                "role all: the simulated engine (default: next to outrider)",
                "--sim-binary /usr/local/bin/outrider-sim"),
    make_option("sim-speedup", ot::number, "10",
                "role all: the simulated engines' --speedup",
                "--sim-speedup 1"),
    make_option("sim-kv-blocks", ot::integer, "16384",
                "role all: KV blocks (of 16 tokens) per simulated engine",
                "--sim-kv-blocks 65536", {}, 16, 100000000),
    make_option("sim-args", ot::string, "",
                "role all: more flags for every simulated engine, separated by "
                "spaces (outrider-sim --help)",
                "--sim-args \"--kv-offload-blocks 65536\""),
    make_option("sim-lora-modules", ot::string, "",
                "role all: LoRA adapters the simulated engines serve, comma "
                "separated (requests name them as their model)",
                "--sim-lora-modules sql,chat"),
    make_option(
      "demo-requests", ot::integer, "0",
      "role all: run the demo workload (multi-turn conversations sharing "
      "system prompts) of this many requests, print a summary, exit",
      "--demo-requests 48", {}, 0, 1000000),
    make_option("debug-hang-on-shutdown", ot::boolean, "false",
                "debugging: add an actor that never stops, to exercise "
                "--shutdown-timeout",
                "--debug-hang-on-shutdown", {}, 0, 0, true),
    make_option(
      "debug-crash-endpoint", ot::boolean, "false",
      "debugging: POST /debug/crash?child=NAME on the status server kills "
      "that supervised actor (fault tests)",
      "--debug-crash-endpoint", {}, 0, 0, true),
  };
  for (auto& o : text)
    specs.push_back(std::move(o));
  return specs;
}

} // namespace

const std::vector<option_spec>& option_specs() {
  static const auto specs = make_specs();
  return specs;
}

} // namespace outrider::runtime
