// The router's options on where requests go: the routing mode and its
// weights, predicted blocks, disaggregation, the router's queue and its
// flow control, session affinity. Part of the one table of options
// (option_table.cpp keeps them in this place in `--help`).
#include "runtime/option_table_parts.hpp"

namespace outrider::runtime {

std::vector<option_spec> routing_option_specs() {
  using ot = option_type;
  return {
    make_option("router-mode", ot::string, "kv",
                "router: kv (prefix overlap and load), round-robin or random",
                "--router-mode round-robin", {"kv", "round-robin", "random"}),
    make_option(
      "kv-overlap-score-weight", ot::number, "1.0",
      "router: weight of prefill blocks against decode blocks in the cost",
      "--kv-overlap-score-weight 2"),
    make_option(
      "kv-decode-weight", ot::number, "0.1",
      "router: weight of decode blocks (held, plus the prompt's new ones) "
      "in the cost",
      "--kv-decode-weight 1"),
    make_option(
      "kv-queue-weight", ot::number, "0.25",
      "router: weight of a rank's queued prefill blocks against the "
      "prompt's own uncached blocks (below 1: a cache hit is worth more "
      "than its own prefill time, it frees the rank for others)",
      "--kv-queue-weight 1"),
    make_option(
      "kv-evict-weight", ot::number, "1.5",
      "router: extra weight of uncached prompt blocks that evict cached "
      "ones from a full cache",
      "--kv-evict-weight 0"),
    make_option(
      "kv-cpu-weight", ot::number, "0.8",
      "router: what a prompt block held only in a worker's CPU offload "
      "tier is worth against one on its GPU (1.0): loaded back, not "
      "computed (chosen by bench/tier_weights.py, docs/benchmarks.md)",
      "--kv-cpu-weight 0.5"),
    make_option(
      "kv-storage-weight", ot::number, "0.25",
      "router: the same for a block held only in a storage tier (disk, "
      "object store)",
      "--kv-storage-weight 0"),
    make_option(
      "kv-credit-remote", ot::boolean, "false",
      "router: credit a worker with copies its engine reports on a REMOTE "
      "tier or another owner's tier (off: only its own)",
      "--kv-credit-remote"),
    make_option(
      "kv-slot-cap", ot::integer, "1048576",
      "the most blocks an index keeps per rank and offload tier, oldest "
      "dropped first: a publisher that never removes cannot grow it "
      "(sidecar: its store and what it forwards; router: also on GPU "
      "when the worker reports no total)",
      "--kv-slot-cap 200000", {}, 1, int64_t{1} << 32),
    make_option(
      "kv-priority-overlap", ot::number, "0",
      "router, kv mode: a request whose rank caches this share of its "
      "prompt gets priority -1, ahead of the engine's queue (engines need "
      "priority scheduling); 0: off; --role all: 0.5 unless given",
      "--kv-priority-overlap 0.5"),
    make_option(
      "kv-prediction-ttl", ot::duration, "5s",
      "router: how long a prefilled prompt counts as cached on its rank "
      "before its KV events arrive",
      "--kv-prediction-ttl 2s"),
    make_option(
      "router-temperature", ot::number, "0",
      "router: 0 picks the lowest cost; above 0 samples softmax(-cost/T)",
      "--router-temperature 0.5"),
    make_option(
      "router-search", ot::string, "pruned",
      "router, kv mode: pruned scores only the ranks that can have the "
      "lowest cost; exhaustive scores every rank (the same choice, slower "
      "with many workers; for comparison)",
      "--router-search exhaustive", {"pruned", "exhaustive"}),
    make_option(
      "metrics-worker-series-cap", ot::integer, "4096",
      "router: (worker, rank) pairs whose load gets series of their own on "
      "/metrics (worker ids come from discovery); later ones are counted in "
      "outrider_metrics_capped_total{label=\"worker\"}",
      "--metrics-worker-series-cap 20000", {}, 0, 1000000),
    make_option("migration-limit", ot::integer, "2",
                "router: times a broken stream moves to another worker",
                "--migration-limit 1", {}, 0, 100),
    make_option(
      "router-conditional-disagg", ot::boolean, "false",
      "router: prefill on prefill workers and decode on decode workers, "
      "or prefill locally on the decode worker, by policy",
      "--router-conditional-disagg"),
    make_option("router-conditional-disagg-config", ot::string, "{}",
                "router: the policy as JSON (policy isl_bounding|prefill_load|"
                "isl_or_load, eff_isl_threshold, eff_isl_ratio_threshold, "
                "prefill_busy_threshold, decode_busy_threshold)",
                "--router-conditional-disagg-config "
                "'{\"policy\":\"isl_or_load\",\"eff_isl_threshold\":4096}'"),
    make_option(
      "router-queue-threshold", ot::number, "0",
      "router: queued prefill tokens above which a worker counts as busy "
      "(0: no threshold)",
      "--router-queue-threshold 8192"),
    make_option(
      "router-queue-kv-share", ot::number, "0.01",
      "router, kv mode: a worker also counts as busy when the prompt blocks "
      "waiting behind the one it is computing exceed this share of the "
      "KV blocks its running requests leave free (waiting longer, a "
      "prompt's cached prefix is evicted before it is admitted); 0: off",
      "--router-queue-kv-share 0"),
    make_option(
      "queue-timeout", ot::duration, "60s",
      "router: how long a request may wait in the router's queue while "
      "every worker is busy; beyond: 429 (x-outrider-dropped-reason: "
      "ttl-expired)",
      "--queue-timeout 30s"),
    make_option(
      "flow-band-cap", ot::integer, "5000",
      "router: requests waiting in one priority band at most; beyond, the "
      "newest of the flow with the most waiting is shed: 429 "
      "(x-outrider-dropped-reason: saturated)",
      "--flow-band-cap 1000", {}, 1, 1000000),
    make_option(
      "flow-quantum", ot::integer, "4096",
      "router: prompt tokens a flow (tenant) is credited per round of the "
      "queue's deficit round robin: flows share a band by the tokens "
      "they would have computed, not by their number of requests",
      "--flow-quantum 8192", {}, 1, 1 << 24),
    make_option(
      "session-affinity", ot::string, "off",
      "router: the turns of a session (requests with the same "
      "--session-header) go back to the worker of the last one: hard "
      "(always, while it can take them), soft (while its cost is within "
      "--session-margin of the best worker's) or off",
      "--session-affinity soft", {"off", "soft", "hard"}),
    make_option(
      "session-header", ot::string, "x-session-id",
      "router: the request header naming a session (also read from gRPC "
      "metadata)",
      "--session-header x-conversation-id"),
    make_option(
      "session-margin", ot::number, "0.25",
      "router, soft session affinity: the session's worker is kept while "
      "its cost is at most the best worker's times 1 + this, plus a block",
      "--session-margin 0.5"),
    make_option(
      "session-ttl", ot::duration, "10m",
      "router: a session not seen for this long is forgotten (at most "
      "100,000 are remembered, the least recently used go first)",
      "--session-ttl 30m"),
    make_option(
      "flow-objectives", ot::string, "{}",
      "router: priority of each x-gateway-inference-objective name, as a "
      "JSON object of integers (-100..100, higher first; an objective not "
      "named: 0)",
      "--flow-objectives '{\"critical\":10,\"batch\":-10}'"),
  };
}

} // namespace outrider::runtime
