#!/usr/bin/python3
"""Routing quality: replays the Mooncake trace through `outrider --role all`
with 4 simulated workers in kv, round-robin and random mode, in one run, and
reports the KV hit rate (against what an infinite cache allows), TTFT p50/p99
and throughput. Only the Python standard library (Debian's python3).

  bench/trace_replay.py [--requests N] [--time-scale S] [--max-output T]

Each trace line: timestamp (ms), input_length, output_length, hash_ids (one
id per 512-token block; equal ids = shared prefix). A hash id becomes its own
deterministic 512 tokens; the prompt is cut at input_length.
"""
import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TRACE = os.path.join(ROOT, "..", "shared", "data", "mooncake_synthetic_trace.jsonl")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def block_tokens(h):
    return [1 + (h * 1000003 + j * 7919) % 31000 for j in range(512)]


def prompt_of(rec):
    toks = []
    for h in rec["hash_ids"]:
        toks.extend(block_tokens(h))
    return toks[: rec["input_length"]]


def ideal_hit_tokens(recs):
    """Prompt tokens an infinite prefix cache would serve."""
    seen = set()
    hit = 0
    for r in recs:
        for i, h in enumerate(r["hash_ids"]):
            if h not in seen:
                break
            hit += min(512, r["input_length"] - i * 512)
        seen.update(r["hash_ids"])
    return hit


def one_request(port, prompt, max_tokens, out, lock):
    body = json.dumps({"prompt": prompt, "max_tokens": max_tokens, "stream": True})
    t0 = time.monotonic()
    ttft = None
    cached = 0
    ok = False
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        c.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
        r = c.getresponse()
        for raw in r:
            line = raw.decode().strip()
            if not line.startswith("data: "):
                continue
            data = line[6:]
            if data == "[DONE]":
                ok = True
                break
            ev = json.loads(data)
            if "error" in ev:
                break
            if ttft is None and ev["choices"][0]["token_ids"]:
                ttft = time.monotonic() - t0
            if "usage" in ev:
                cached = ev["usage"]["prompt_tokens_details"]["cached_tokens"]
        c.close()
    except Exception as e:  # counted as a failure
        print("request failed:", e, file=sys.stderr)
    with lock:
        out.append((ok, ttft, cached, len(prompt), time.monotonic() - t0))


def run_mode(mode, recs, args, outrider):
    work = tempfile.mkdtemp(prefix="outrider-trace-")
    port, status = free_port(), free_port()
    proc = subprocess.Popen(
        [outrider, "--role", "all", "--sim-engines", "4", "--router-mode", mode,
         "--sim-speedup", str(args.speedup), "--sim-kv-blocks", str(args.kv_blocks),
         "--data-dir", work, "--http-port", str(port), "--system-port", str(status),
         "--grpc-port", "0",
         "--log-level", "warn"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        # Ready once all 4 workers are registered.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if len([f for f in os.listdir(os.path.join(work, "discovery"))
                        if f.endswith(".json")]) == 4:
                    break
            except FileNotFoundError:
                pass
            time.sleep(0.1)
        time.sleep(0.5)
        results, lock = [], threading.Lock()
        start = time.monotonic() + 0.5
        t_first = recs[0]["timestamp"]
        jobs = [(start + (r["timestamp"] - t_first) / 1000.0 / args.time_scale, r)
                for r in recs]
        next_job = [0]

        def worker():
            # Each worker takes the next request, waits until it is due, sends.
            while True:
                with lock:
                    if next_job[0] >= len(jobs):
                        return
                    due, r = jobs[next_job[0]]
                    next_job[0] += 1
                delay = due - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                one_request(port, prompt_of(r),
                            min(args.max_output, max(1, r["output_length"])),
                            results, lock)

        pool = [threading.Thread(target=worker) for _ in range(args.clients)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
        elapsed = time.monotonic() - start
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    ok = [x for x in results if x[0]]
    ttfts = sorted(x[1] for x in ok if x[1] is not None)
    pct = lambda v, p: v[min(len(v) - 1, int(p * (len(v) - 1)))] if v else float("nan")
    return {
        "ok": len(ok), "failed": len(results) - len(ok),
        "cached": sum(x[2] for x in ok), "prompt": sum(x[3] for x in ok),
        "ttft_p50": pct(ttfts, 0.5), "ttft_p99": pct(ttfts, 0.99),
        "rps": len(ok) / elapsed, "elapsed": elapsed,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=600)
    ap.add_argument("--time-scale", type=float, default=8.0,
                    help="replay this many times faster than the trace")
    ap.add_argument("--speedup", type=float, default=20.0,
                    help="the simulated engines' --speedup")
    ap.add_argument("--max-output", type=int, default=32,
                    help="cap on output tokens per request")
    ap.add_argument("--kv-blocks", type=int, default=65536)
    ap.add_argument("--clients", type=int, default=48,
                    help="client threads (requests in flight at most)")
    ap.add_argument("--outrider", default=os.path.join(ROOT, "build", "outrider"))
    args = ap.parse_args()
    recs = [json.loads(l) for l in open(TRACE)][: args.requests]
    ideal = ideal_hit_tokens(recs) / sum(r["input_length"] for r in recs)
    print(f"{len(recs)} trace requests, replayed {args.time_scale}x faster; engines at "
          f"speedup {args.speedup}, {args.kv_blocks} blocks of 16 tokens each; output capped "
          f"at {args.max_output} tokens")
    print(f"infinite-cache hit rate: {100 * ideal:.1f}%")
    print(f"{'mode':12} {'ok':>5} {'fail':>5} {'hit rate':>9} {'of ideal':>9} "
          f"{'TTFT p50':>10} {'TTFT p99':>10} {'req/s':>7}")
    res = {}
    for mode in ["kv", "round-robin", "random"]:
        m = run_mode(mode, recs, args, args.outrider)
        res[mode] = m
        hit = m["cached"] / m["prompt"] if m["prompt"] else 0
        print(f"{mode:12} {m['ok']:>5} {m['failed']:>5} {100 * hit:>8.1f}% "
              f"{100 * hit / ideal if ideal else 0:>8.1f}% {1000 * m['ttft_p50']:>8.0f}ms "
              f"{1000 * m['ttft_p99']:>8.0f}ms {m['rps']:>7.2f}", flush=True)
    kv, rr = res["kv"], res["round-robin"]
    print(f"TTFT p50 round-robin / kv: {rr['ttft_p50'] / kv['ttft_p50']:.2f}x")


if __name__ == "__main__":
    main()
