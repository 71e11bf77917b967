#!/usr/bin/python3
"""Offload-tier weights chosen by measurement: replays the first N Mooncake
trace requests through `outrider --role all` in kv mode, with GPU caches too
small for the trace and a CPU tier behind them (a block reloaded from it
costs --kv-offload-load-ms instead of being computed), once per
--kv-cpu-weight, the weights taken in turns for each repeat so drift on a
shared machine touches all alike. Prints, per weight, the KV hit rate, TTFT
p50/p99 and throughput, and each as a ratio to weight 1.0 (a CPU copy
counted as a GPU one) measured in the same run.

  bench/tier_weights.py --requests 800 --weights 0,0.25,0.5,0.8,1 --repeat 3

Uses bench/trace_replay.py's replay (Python's standard library only).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trace_replay as tr  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=800)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--time-scale", type=float, default=10.0)
    ap.add_argument("--speedup", type=float, default=5.0)
    ap.add_argument("--kv-blocks", type=int, default=8000,
                    help="GPU blocks (of 16 tokens) per worker")
    ap.add_argument("--offload-blocks", type=int, default=100000,
                    help="CPU tier blocks per worker")
    ap.add_argument("--load-ms", type=float, default=0.05,
                    help="model time to reload one block from the CPU tier")
    ap.add_argument("--weights", default="0,0.25,0.5,0.8,1")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--max-output", type=int, default=32)
    ap.add_argument("--outrider", default=os.path.join(tr.ROOT, "build", "outrider"))
    args = ap.parse_args()
    weights = [float(w) for w in args.weights.split(",")]
    if 1.0 not in weights:
        weights.append(1.0)  # the baseline
    recs = [tr.json.loads(l) for l in open(tr.TRACE)][: args.requests]
    tr.assign_identities(recs, 0, 0)
    bodies = [tr.json.dumps({"prompt": tr.prompt_of(r), "stream": True,
                             "max_tokens": min(args.max_output,
                                               max(1, r["output_length"]))}).encode()
              for r in recs]
    print(f"{len(recs)} requests, {args.workers} workers, {args.time_scale}x; "
          f"GPU {args.kv_blocks} and CPU {args.offload_blocks} blocks a worker, "
          f"reload {args.load_ms} ms a block; weights {weights}, "
          f"{args.repeat} turns", flush=True)
    runs = {w: [] for w in weights}
    for turn in range(args.repeat):
        for w in weights:
            a = argparse.Namespace(
                outrider=args.outrider, speedup=args.speedup,
                kv_blocks=args.kv_blocks, adapters=0,
                router_arg=[f"--kv-cpu-weight={w}",
                            f"--sim-args=--kv-offload-blocks {args.offload_blocks} "
                            f"--kv-offload-load-ms {args.load_ms}"])
            m = tr.run_point(recs, bodies, a, args.workers, "kv", args.time_scale)
            m["hit"] = m["cached"] / m["prompt"] if m["prompt"] else 0
            runs[w].append(m)
            d = m["decisions"]
            print(f"turn {turn} weight {w:<5g} ok {m['ok']:>4} fail {m['failed']:>3} "
                  f"hit {100 * m['hit']:5.1f}%  TTFT p50 {1000 * m['ttft_p50']:6.0f} ms "
                  f"p99 {1000 * m['ttft_p99']:6.0f} ms  {m['tok_s']:6.0f} tok/s  "
                  f"offloaded placed {d.get('offloaded', 0):.0f}", flush=True)

    def mean(w, k):
        return sum(r[k] for r in runs[w]) / len(runs[w])

    base = {k: mean(1.0, k) for k in ("hit", "ttft_p50", "ttft_p99", "tok_s")}
    print("\n| --kv-cpu-weight | hit | TTFT p50 | p99 | tok/s | p50 vs 1.0 | "
          "p99 vs 1.0 | tok/s vs 1.0 |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for w in weights:
        h, p50, p99, ts = (mean(w, k) for k in ("hit", "ttft_p50", "ttft_p99", "tok_s"))
        print(f"| {w:g} | {100 * h:.1f}% | {1000 * p50:.0f} ms | {1000 * p99:.0f} ms | "
              f"{ts:.0f} | {p50 / base['ttft_p50']:.2f}x | {p99 / base['ttft_p99']:.2f}x | "
              f"{ts / base['tok_s']:.2f}x |")


if __name__ == "__main__":
    main()
