#!/usr/bin/python3
"""Routing under load: replays the Mooncake trace through `outrider --role
all` with simulated workers, for each worker count and load (time scale), in
kv, round-robin and random mode in the same run, and reports the KV hit rate
against an infinite cache and against one pooled LRU cache of the cluster's
capacity, TTFT and ITL p50/p99, throughput and errors. Writes a table
(Markdown and CSV) and plots (PNG) with --out.

  bench/trace_replay.py --requests 1500 --workers 4 --time-scales 5,10,20,30
  bench/trace_replay.py --help

Each trace line: timestamp (ms), input_length, output_length, hash_ids (one
id per 512-token block; equal ids = shared prefix). A hash id becomes its own
deterministic 512 tokens; the prompt is cut at input_length. Requests arrive
open-loop at their (scaled) timestamps; one asyncio loop, no client threads.
Lines that carry a conversation (bench/conversation_trace.py, --trace) are
replayed closed-loop per conversation: its first turn at its scaled
timestamp, each later turn think_ms / scale after the answer before it ended.
Python's standard library, plus matplotlib for the plots.
"""
import argparse
import asyncio
import collections
import csv
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TRACE = os.path.join(ROOT, "..", "shared", "data", "mooncake_synthetic_trace.jsonl")
BLOCK = 16  # tokens per engine block (role all's engines)
HASH_TOKENS = 512  # tokens per trace hash id


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def block_tokens(h):
    return [1 + (h * 1000003 + j * 7919) % 31000 for j in range(HASH_TOKENS)]


def prompt_of(rec):
    toks = []
    for h in rec["hash_ids"]:
        toks.extend(block_tokens(h))
    return toks[: rec["input_length"]]


def keys_of(rec):
    """The cache keys of a request's blocks: its hash ids, under its adapter
    and tenant (blocks of other adapters or tenants are other KV)."""
    return rec.get("keys") or rec["hash_ids"]


def assign_identities(recs, adapters, tenants):
    """Gives each conversation (requests sharing a first hash id) an adapter
    (none, or lora-1..N) and a tenant salt, deterministically. In this
    trace prefixes are shared within such a group only (splitting by the
    first two ids moves the infinite-cache bound of the first 1,500 from
    24.666% to 24.663%), so identities test that nothing false is matched,
    not how much sharing they cost."""
    for r in recs:
        first = r["hash_ids"][0] if r["hash_ids"] else 0
        a = (first * 2654435761 >> 7) % (adapters + 1) if adapters else 0
        t = (first * 40503 >> 3) % tenants if tenants else None
        r["adapter"] = f"lora-{a}" if a else None
        r["tenant"] = f"tenant-{t}" if t is not None else None
        r["keys"] = [(r["adapter"], r["tenant"], h) for h in r["hash_ids"]]


def hit_tokens(rec, held):
    """Prompt tokens served from a cache holding the keys `held`: the
    leading run of the prompt's keys, whole engine blocks only."""
    hit = 0
    for i, h in enumerate(keys_of(rec)):
        if h not in held:
            break
        hit += min(HASH_TOKENS, rec["input_length"] - i * HASH_TOKENS)
    return hit // BLOCK * BLOCK


def ideal_hit_tokens(recs):
    """Prompt tokens an infinite prefix cache would serve."""
    seen, hit = set(), 0
    for r in recs:
        hit += hit_tokens(r, seen)
        seen.update(keys_of(r))
    return hit


def pooled_lru_hit_tokens(recs, capacity_blocks):
    """Prompt tokens one LRU cache of the whole cluster's capacity would
    serve: the bound for a router that cannot add capacity."""
    cap = max(1, capacity_blocks * BLOCK // HASH_TOKENS)
    lru, hit = collections.OrderedDict(), 0
    for r in recs:
        hit += hit_tokens(r, lru)
        for h in keys_of(r):
            lru[h] = True
            lru.move_to_end(h)
        while len(lru) > cap:
            lru.popitem(last=False)
    return hit


async def one_request(port, body, prompt_len, t_due, out):
    """One streamed completion over HTTP/1.0 (the body ends at close);
    returns its record (also appended to out)."""
    await asyncio.sleep(max(0.0, t_due - time.monotonic()))
    t0 = time.monotonic()
    rec = {"ok": False, "ttft": None, "gaps": [], "cached": 0, "out": 0, "status": 0,
           "prompt": prompt_len}
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"POST /v1/completions HTTP/1.0\r\nHost: 127.0.0.1\r\n"
                     b"Content-Type: application/json\r\nContent-Length: "
                     + str(len(body)).encode() + b"\r\n\r\n" + body)
        await writer.drain()
        status = await reader.readline()
        rec["status"] = int(status.split()[1]) if status else 0
        while (await reader.readline()) not in (b"\r\n", b"\n", b""):
            pass
        last = t0
        while True:
            line = await reader.readline()
            if not line:
                break
            if not line.startswith(b"data: "):
                continue
            data = line[6:].strip()
            if data == b"[DONE]":
                rec["ok"] = rec["status"] == 200
                break
            ev = json.loads(data)
            if "error" in ev:
                break
            ids = ev["choices"][0].get("token_ids") or []
            now = time.monotonic()
            if ids:
                if rec["ttft"] is None:
                    rec["ttft"] = now - t0
                    rec["gaps"].extend([0.0] * (len(ids) - 1))
                else:
                    rec["gaps"].append(now - last)
                    rec["gaps"].extend([0.0] * (len(ids) - 1))
                last = now
                rec["out"] += len(ids)
            if ev.get("usage"):
                rec["cached"] = ev["usage"]["prompt_tokens_details"]["cached_tokens"]
        writer.close()
    except Exception as e:  # counted as a failure
        rec["error"] = str(e)
    rec["end"] = time.monotonic()
    out.append(rec)
    return rec


async def one_conversation(port, turns, t_due, scale, out):
    """A conversation's turns in order: each think_ms / scale after the
    previous answer ended (or failed)."""
    for rec, body in turns:
        if rec.get("turn", 0) > 0:
            t_due = max(t_due, time.monotonic()) + rec.get("think_ms", 0) / 1000.0 / scale
        done = await one_request(port, body, rec["input_length"], t_due, out)
        t_due = done["end"]


def start_cluster(args, workers, mode, work):
    port, status = free_port(), free_port()
    cmd = [args.outrider, "--role", "all", "--sim-engines", str(workers),
           "--router-mode", mode, "--sim-speedup", str(args.speedup),
           "--sim-kv-blocks", str(args.kv_blocks), "--data-dir", work,
           "--http-port", str(port), "--system-port", str(status),
           "--grpc-port", "0", "--log-level", "warn"] + args.router_arg
    if args.adapters:
        cmd += ["--sim-lora-modules",
                ",".join(f"lora-{i}" for i in range(1, args.adapters + 1))]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 180
    import urllib.request
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{status}/ready", timeout=1) as r:
                if r.status == 200:
                    return proc, port, status
        except Exception:
            pass
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError("the cluster did not turn ready in 180 s")


def router_decisions(status):
    """The router's placement counters: blocks of the prompts placed, of the
    best overlap on offer, of the chosen rank's and served by the engines
    (where hits go), and the requests that lost 1,024+ chosen blocks."""
    import urllib.request
    out = {}
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{status}/metrics", timeout=5) as r:
            text = r.read().decode()
    except Exception:
        return out
    for line in text.splitlines():
        for key, name in (("prompt", 'of="prompt"'), ("best", 'of="best_overlap"'),
                          ("chosen", 'of="chosen_overlap"'), ("served", 'of="served"'),
                          ("offloaded", 'of="offloaded"')):
            if line.startswith("outrider_router_placed_blocks_total{") and name in line:
                out[key] = float(line.split()[-1])
        if line.startswith("outrider_router_overlap_unserved_blocks_bucket{"):
            le = line.split('le="')[1].split('"')[0]
            out[f"unserved_le_{le}"] = float(line.split()[-1])
        if line.startswith("outrider_router_placement_choices_total{"):
            choice = line.split('choice="')[1].split('"')[0]
            out[choice] = float(line.split()[-1])
    return out


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(p * (len(v) - 1)))] if v else float("nan")


def run_point(recs, bodies, args, workers, mode, scale):
    work = tempfile.mkdtemp(prefix="outrider-trace-")
    proc, port, status = start_cluster(args, workers, mode, work)
    decisions = {}
    try:
        out = []
        start = time.monotonic() + 0.5
        t_first = recs[0]["timestamp"]

        # Each conversation (closed-loop) or lone request at its time.
        groups = {}
        for i, (r, b) in enumerate(zip(recs, bodies)):
            groups.setdefault(r.get("conversation", ("lone", i)), []).append((r, b))

        async def all_requests():
            await asyncio.gather(*[
                one_conversation(port, turns,
                                 start + (turns[0][0]["timestamp"] - t_first) / 1000.0 / scale,
                                 scale, out)
                for turns in groups.values()])

        asyncio.run(all_requests())
        elapsed = max(x["end"] for x in out) - start
        decisions = router_decisions(status)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(work, ignore_errors=True)
    ok = [x for x in out if x["ok"]]
    prompt = sum(x["prompt"] for x in ok)
    ttfts = [x["ttft"] for x in ok if x["ttft"] is not None]
    gaps = [g for x in ok for g in x["gaps"]]
    return {
        "workers": workers, "mode": mode, "scale": scale, "ok": len(ok),
        "failed": len(out) - len(ok), "cached": sum(x["cached"] for x in ok),
        "prompt": prompt, "ttft_p50": pct(ttfts, 0.5), "ttft_p99": pct(ttfts, 0.99),
        "itl_p50": pct(gaps, 0.5), "itl_p99": pct(gaps, 0.99),
        "rps": len(ok) / elapsed, "tok_s": sum(x["out"] for x in ok) / elapsed,
        "ttfts": ttfts, "decisions": decisions,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trace", default=TRACE,
                    help="a trace in the Mooncake format (default: the Mooncake "
                         "synthetic trace; bench/conversation_trace.py writes "
                         "conversations)")
    ap.add_argument("--requests", type=int, default=1500,
                    help="the first N trace requests (3993: all the Mooncake trace)")
    ap.add_argument("--workers", default="4", help="comma-separated worker counts")
    ap.add_argument("--time-scales", default="5,10,20",
                    help="comma-separated loads: replay this many times faster")
    ap.add_argument("--modes", default="kv,round-robin,random")
    ap.add_argument("--speedup", type=float, default=5.0,
                    help="the simulated engines' --speedup")
    ap.add_argument("--kv-blocks", type=int, default=300000,
                    help="KV blocks (of 16 tokens) per worker")
    ap.add_argument("--max-output", type=int, default=32,
                    help="cap on output tokens per request")
    ap.add_argument("--max-input", type=int, default=131072 - 64,
                    help="longer prompts are left out (beyond the context)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="run each point this many times, going round the "
                         "modes; the table, the ratios and the plots use the "
                         "means")
    ap.add_argument("--router-arg", action="append", default=[],
                    help="an extra flag for outrider (repeat)")
    ap.add_argument("--adapters", type=int, default=0,
                    help="LoRA adapters served (lora-1..N); each conversation "
                         "gets one or the base model")
    ap.add_argument("--tenants", type=int, default=0,
                    help="tenants: each conversation gets one's cache_salt")
    ap.add_argument("--out", help="directory for the table, CSV and plots")
    ap.add_argument("--tag", default="trace", help="file name prefix in --out")
    ap.add_argument("--outrider", default=os.path.join(ROOT, "build", "outrider"))
    ap.add_argument("--replot", help="draw the plots again from a run's JSON")
    args = ap.parse_args()
    if args.replot:
        saved = json.load(open(args.replot))
        args.modes = saved["modes"]
        plot(args, saved["rows"], os.path.splitext(args.replot)[0])
        return
    recs = [json.loads(l) for l in open(args.trace)][: args.requests]
    recs = [r for r in recs if r["input_length"] + args.max_output <= args.max_input]
    assign_identities(recs, args.adapters, args.tenants)

    def body_of(r):
        b = {"prompt": prompt_of(r), "stream": True,
             "max_tokens": min(args.max_output, max(1, r["output_length"]))}
        if r.get("adapter"):
            b["model"] = r["adapter"]
        if r.get("tenant"):
            b["cache_salt"] = r["tenant"]
        return json.dumps(b).encode()

    bodies = [body_of(r) for r in recs]
    total = sum(r["input_length"] for r in recs)
    ideal = ideal_hit_tokens(recs) / total
    print(f"{len(recs)} trace requests; engines at speedup {args.speedup}, "
          f"{args.kv_blocks} blocks of {BLOCK} tokens each; output capped at "
          f"{args.max_output} tokens; {args.adapters} adapters, {args.tenants} "
          f"tenants; infinite-cache hit rate {100 * ideal:.1f}%")
    rows = []
    for workers in [int(w) for w in args.workers.split(",")]:
        pooled = pooled_lru_hit_tokens(recs, workers * args.kv_blocks) / total
        print(f"\n{workers} workers: pooled-LRU hit rate {100 * pooled:.1f}%")
        print(f"{'scale':>6} {'mode':12} {'ok':>5} {'fail':>4} {'hit':>6} {'/inf':>6} "
              f"{'/lru':>6} {'TTFT p50':>9} {'p99':>8} {'ITL p50':>8} {'p99':>7} "
              f"{'req/s':>6} {'tok/s':>6}")
        for scale in [float(s) for s in args.time_scales.split(",")]:
            # Repeats go round the modes (kv, rr, random, kv, rr, ...), so
            # that the machine's load drifting over a long point weighs on
            # every mode alike.
            modes = args.modes.split(",")
            runs = {mode: [] for mode in modes}
            for run in range(max(1, args.repeat)):
                for mode in modes:
                    m = run_point(recs, bodies, args, workers, mode, scale)
                    m["run"] = run
                    m["hit"] = m["cached"] / m["prompt"] if m["prompt"] else 0
                    m["of_ideal"] = m["hit"] / ideal if ideal else 0
                    m["of_lru"] = m["hit"] / pooled if pooled else 0
                    runs[mode].append(m)
                    print_point(m, scale, mode)
            for mode in modes:
                if len(runs[mode]) > 1:
                    rows.append(mean_of(runs[mode]))
                    print_spread(runs[mode], rows[-1], mode)
                else:
                    rows.append(runs[mode][0])
            by = {r["mode"]: r for r in rows if r["workers"] == workers and r["scale"] == scale}
            if "kv" in by and "round-robin" in by:
                kv, rr = by["kv"], by["round-robin"]
                print(f"{'':>6} round-robin / kv: TTFT p50 {rr['ttft_p50'] / kv['ttft_p50']:.2f}x, "
                      f"p99 {rr['ttft_p99'] / kv['ttft_p99']:.2f}x, throughput kv/rr "
                      f"{kv['tok_s'] / rr['tok_s']:.2f}", flush=True)
    if args.out:
        write_outputs(args, rows, ideal, recs)


def print_point(m, scale, mode):
    print(f"{scale:>6g} {mode:12} {m['ok']:>5} {m['failed']:>4} "
          f"{100 * m['hit']:>5.1f}% {100 * m['of_ideal']:>5.1f}% "
          f"{100 * m['of_lru']:>5.1f}% {1000 * m['ttft_p50']:>7.0f}ms "
          f"{1000 * m['ttft_p99']:>6.0f}ms {1000 * m['itl_p50']:>6.1f}ms "
          f"{1000 * m['itl_p99']:>5.0f}ms {m['rps']:>6.1f} {m['tok_s']:>6.0f}",
          flush=True)
    d = m["decisions"]
    if d.get("prompt"):
        # Where the hits went: what the index offered (best overlap), what
        # was chosen, what the engines served.
        if d.get("chosen"):
            print(f"{'':>6} {'':12} served / chosen overlap "
                  f"{100 * d.get('served', 0) / d['chosen']:.2f}% "
                  f"(a false hit is chosen and not served)", flush=True)
        print(f"{'':>6} {'':12} placed: best overlap on offer "
              f"{100 * d['best'] / d['prompt']:.1f}%, chosen "
              f"{100 * d['chosen'] / d['prompt']:.1f}%, served "
              f"{100 * d.get('served', 0) / d['prompt']:.1f}% of prompt blocks; "
              f"{d.get('less_overlap', 0):.0f} placements took less than "
              f"the best; {lost_big(d):.0f} requests lost 1,024+ chosen blocks",
              flush=True)


def lost_big(d):
    """Requests whose engine served 1,024 or more blocks fewer than the
    router chose (histogram buckets are cumulative)."""
    return d.get("unserved_le_+Inf", 0) - d.get("unserved_le_1024", 0)


MEANS = ["ok", "failed", "cached", "prompt", "hit", "of_ideal", "of_lru", "ttft_p50",
         "ttft_p99", "itl_p50", "itl_p99", "rps", "tok_s"]


def mean_of(runs):
    """One row for repeated runs of a point: the means, each run's hit rates
    kept (`runs_of_lru`, `runs_of_ideal`), the TTFTs of all runs pooled."""
    m = dict(runs[0])
    for k in MEANS:
        m[k] = sum(r[k] for r in runs) / len(runs)
    m["run"] = "mean"
    m["repeats"] = len(runs)
    m["runs_of_lru"] = [r["of_lru"] for r in runs]
    m["runs_of_ideal"] = [r["of_ideal"] for r in runs]
    m["ttfts"] = [t for r in runs for t in r["ttfts"]]
    return m


def print_spread(runs, m, mode):
    lru = [100 * r["of_lru"] for r in runs]
    inf = [100 * r["of_ideal"] for r in runs]
    print(f"{'':>6} {mode}, mean of {len(runs)}: hit {100 * m['hit']:.1f}%, "
          f"{100 * m['of_ideal']:.1f}% of infinite ({min(inf):.1f}-{max(inf):.1f}), "
          f"{100 * m['of_lru']:.1f}% of pooled LRU ({min(lru):.1f}-{max(lru):.1f}); "
          f"TTFT p50 {1000 * m['ttft_p50']:.0f} ms, p99 {1000 * m['ttft_p99']:.0f} ms, "
          f"{m['tok_s']:.0f} tok/s", flush=True)


def write_outputs(args, rows, ideal, recs):
    os.makedirs(args.out, exist_ok=True)
    base = os.path.join(args.out, args.tag)
    keys = ["workers", "scale", "mode", "run", "ok", "failed", "hit", "of_ideal", "of_lru",
            "ttft_p50", "ttft_p99", "itl_p50", "itl_p99", "rps", "tok_s"]
    with open(base + ".csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(keys)
        for r in rows:
            w.writerow([r.get(k, 0) if not isinstance(r.get(k), float) else f"{r[k]:.4f}"
                        for k in keys])
    with open(base + ".json", "w") as f:
        json.dump({"modes": args.modes, "ideal": ideal, "rows": rows}, f)
    plot(args, rows, base)


def plot(args, rows, base):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    colors = {"kv": "#2563eb", "round-robin": "#dc2626", "random": "#9ca3af"}
    for workers in sorted({r["workers"] for r in rows}):
        mine = [r for r in rows if r["workers"] == workers]
        scales = sorted({r["scale"] for r in mine})
        fig, ax = plt.subplots(1, 2, figsize=(11, 4))
        for mode in args.modes.split(","):
            pts = sorted((r["scale"], r) for r in mine if r["mode"] == mode)
            ax[0].plot([s for s, _ in pts], [100 * r["of_ideal"] for _, r in pts],
                       "o-", color=colors.get(mode), label=mode)
            ax[1].plot([s for s, _ in pts], [1000 * r["ttft_p50"] for _, r in pts],
                       "o-", color=colors.get(mode), label=mode + " p50")
            ax[1].plot([s for s, _ in pts], [1000 * r["ttft_p99"] for _, r in pts],
                       "o--", color=colors.get(mode), alpha=0.5, label=mode + " p99")
        ax[0].set(xlabel="load (times faster than the trace)",
                  ylabel="hit rate, % of the infinite cache", ylim=(0, 105),
                  title=f"{workers} workers: KV hit rate vs load")
        ax[1].set(xlabel="load (times faster than the trace)", ylabel="TTFT (ms)",
                  yscale="log", title=f"{workers} workers: TTFT vs load")
        for a in ax:
            a.grid(alpha=0.3)
            a.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(f"{base}_load_{workers}w.png", dpi=110)
        plt.close(fig)
        # TTFT CDF per mode, one panel per load.
        fig, axes = plt.subplots(1, len(scales), figsize=(4 * len(scales), 3.6),
                                 squeeze=False)
        for ax, scale in zip(axes[0], scales):
            for r in mine:
                if r["scale"] != scale or not r["ttfts"]:
                    continue
                v = sorted(1000 * t for t in r["ttfts"])
                ax.plot(v, [(i + 1) / len(v) for i in range(len(v))],
                        color=colors.get(r["mode"]), label=r["mode"])
            ax.set(xscale="log", xlabel="TTFT (ms)", ylabel="fraction of requests",
                   title=f"TTFT CDF, {workers} workers, {scale:g}x")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(f"{base}_ttft_cdf_{workers}w.png", dpi=100)
        plt.close(fig)
    print(f"\nwrote {base}.csv and {base}_*.png")


if __name__ == "__main__":
    main()
