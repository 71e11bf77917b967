#!/usr/bin/python3
"""A router in front of a simulated fleet: for each fleet size, starts
`outrider-sim --fleet N` (N workers in one process, each with its own
record, KV cache and KV stream, a system prompt every worker holds, cache
churn at a set rate) and one `outrider --role router` on its discovery
directory, waits until the router knows every worker, then drives closed-
loop load for a while and reports from the router's own /metrics and
/proc: threads, RSS, CPU, event lag p50/p99 (and p99 of the part spent
waiting for the router actor), decision p50/p99 (histogram
quantiles: linear within a bucket), placements per second, the KV hit rate,
and the time until every worker was known. Ratios are against the first
fleet size of the same run.

  bench/fleet_bench.py --workers 100,1000,10000 --seconds 20
  bench/fleet_bench.py --rate 0.5 --json /tmp/churn.json --label "churn 0.5/s"
  bench/fleet_bench.py --workers 1000 --nats       # NATS discovery and plane
  bench/fleet_bench.py --workers 10000 --seconds 40 --series /tmp/s.jsonl  # per second
  bench/plot_fleet.py docs/fleet_decisions.png /tmp/quiet.json /tmp/churn.json
  bench/fleet_bench.py --help

Standard library only. The fleet and the router share this machine's
cores: figures are for both together.
"""
import argparse
import asyncio
import json
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BLOCK = 16


def free_port():
    # Below the kernel's ephemeral range (32768 up), as the e2e tests pick
    # theirs: a router dialling thousands of relays takes that many local
    # ports from the range, and one of them was once the port it was about
    # to listen on (9,000 workers with --ports 0: "Address already in use");
    # the fleet's other ports (--ports) are the kernel's, from that range.
    for _ in range(1000):
        p = random.randint(15000, 32000)
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", p))
            return p
        except OSError:
            continue
        finally:
            s.close()
    raise RuntimeError("no free port below 32000")


def scrape(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name, _, value = line.rpartition(" ")
        try:
            out[name] = float(value)
        except ValueError:
            pass
    return out


def buckets(m, name):
    """Cumulative (le, count) pairs of a histogram, sorted."""
    pat = re.compile(re.escape(name) + r'_bucket\{le="([^"]+)"\}')
    out = []
    for k, v in m.items():
        g = pat.fullmatch(k)
        if g:
            le = float("inf") if g.group(1) == "+Inf" else float(g.group(1))
            out.append((le, v))
    return sorted(out)


def quantile(before, after, name, q):
    b0 = dict(buckets(before, name))
    pairs = [(le, c - b0.get(le, 0)) for le, c in buckets(after, name)]
    total = pairs[-1][1] if pairs else 0
    if total <= 0:
        return float("nan")
    want = q * total
    lo, below = 0.0, 0
    for le, c in pairs:
        if c >= want:
            if le == float("inf"):
                return lo
            span = c - below
            return lo + (le - lo) * ((want - below) / span if span else 1)
        lo, below = le, c
    return lo


def proc(pid):
    with open(f"/proc/{pid}/status") as f:
        st = dict(l.split(":", 1) for l in f if ":" in l)
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks
    return int(st["Threads"]), int(st["VmRSS"].split()[0]) / 1024, cpu


async def post(port, body):
    r, w = await asyncio.open_connection("127.0.0.1", port)
    data = json.dumps(body).encode()
    w.write(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
            b"application/json\r\nContent-Length: " + str(len(data)).encode() +
            b"\r\nConnection: close\r\n\r\n" + data)
    await w.drain()
    resp = await r.read()
    w.close()
    return resp.startswith(b"HTTP/1.1 200")


async def load(port, seconds, concurrency, system_blocks, seed):
    """Closed loop: each client sends the system prompt plus a suffix of its
    own (one of 64 per client, so later ones find earlier ones cached)."""
    ok = failed = 0
    stop = time.monotonic() + seconds

    async def client(c):
        nonlocal ok, failed
        i = 0
        while time.monotonic() < stop:
            suffix = [30000 + ((seed * 7919 + c * 64 + i % 64) * 131 + j) % 2000
                      for j in range(4 * BLOCK)]
            prompt = list(range(1, system_blocks * BLOCK + 1)) + suffix
            try:
                good = await post(port, {"prompt": prompt, "max_tokens": 2})
            except OSError:
                good = False
            ok, failed = ok + good, failed + (not good)
            i += 1

    await asyncio.gather(*(client(c) for c in range(concurrency)))
    return ok, failed


class Series(threading.Thread):
    """Once a second until stopped: the router's index size, batches
    applied, their lag and wait (sums over the second), decisions and its
    CPU, one JSON line each into `path` (`--series`: where in a run the
    waits come)."""

    def __init__(self, path, status, pid, n):
        super().__init__(daemon=True)
        self.out = open(path, "a")
        self.status, self.pid, self.n = status, pid, n
        self.stop = threading.Event()

    def run(self):
        t0 = time.monotonic()
        last, cpu0 = None, proc(self.pid)[2]
        while not self.stop.wait(1.0):
            try:
                m = scrape(self.status)
                cpu = proc(self.pid)[2]
            except OSError:
                continue
            if last is not None:
                d = lambda k: m.get(k, 0) - last.get(k, 0)
                batches = d("outrider_router_kv_event_wait_seconds_count")
                self.out.write(json.dumps({
                    "workers": self.n,
                    "t": round(time.monotonic() - t0, 2),
                    "entries": m.get("outrider_router_index_entries", 0),
                    "batches": batches,
                    "wait_ms": 1e3 * d("outrider_router_kv_event_wait_seconds_sum") / batches if batches else None,
                    "lag_ms": 1e3 * d("outrider_router_kv_event_lag_seconds_sum") / batches if batches else None,
                    "placed": d("outrider_router_decisions_total{mode=\"kv\"}"),
                    "cpu": round(cpu - cpu0, 3),
                }) + "\n")
                self.out.flush()
            last, cpu0 = m, cpu
        self.out.close()


def run_size(args, n):
    tmp = tempfile.mkdtemp(prefix="outrider-fleet-")
    # The router's log, shown if the run fails (kept outside the discovery
    # directory).
    log = tempfile.NamedTemporaryFile(prefix="outrider-fleet-router-",
                                      suffix=".log", delete=False)
    fleet_port, http, status = free_port(), free_port(), free_port()
    nats, nats_flags, fleet_nats = None, [], []
    if args.nats:
        # A real nats-server with JetStream (the records' bucket), its store
        # in the run's directory.
        nats_port = free_port()
        url = f"nats://127.0.0.1:{nats_port}"
        nats = subprocess.Popen(
            [args.nats_server, "-a", "127.0.0.1", "-p", str(nats_port), "-js",
             "-sd", os.path.join(tmp, "..", os.path.basename(tmp) + "-nats")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", nats_port), 1).close()
                break
            except OSError:
                time.sleep(0.1)
        fleet_nats = ["--nats-url", url]
        nats_flags = ["--discovery", "nats", "--nats-url", url,
                      "--event-plane", "nats"]
    fleet = subprocess.Popen(
        [args.sim, "--fleet", str(n), "--grpc-port", str(fleet_port),
         "--discovery-dir", tmp, "--block-size", str(BLOCK),
         "--num-gpu-blocks-override", str(args.blocks),
         "--shared-prefix-blocks", str(args.system_blocks),
         "--kv-batches-per-second", str(args.rate),
         "--kv-blocks-per-batch", str(args.blocks_per_batch),
         "--relay-mux", args.relay_mux,
         "--ports", str(args.ports or n)] + fleet_nats,
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    router, series = None, None
    try:
        # The fleet says so once every record is written (or it exits).
        line = fleet.stdout.readline()
        if "records in" not in line:
            raise RuntimeError(f"the fleet did not start: {line!r}")
        t0 = time.monotonic()
        router = subprocess.Popen(
            [args.outrider, "--role", "router", "--discovery-dir", tmp,
             "--http-port", str(http), "--system-port", str(status),
             "--grpc-port", "0", "--log-level", "warn",
             # mux (the router's default) or relay; with --relay-mux
             # false, mux measures the router's fallback.
             "--dispatch", args.dispatch] + nats_flags,
            stdout=subprocess.DEVNULL, stderr=log)
        if args.series:
            series = Series(args.series, status, router.pid, n)
            series.start()
        known = None
        while time.monotonic() < t0 + args.join_timeout:
            try:
                if scrape(status).get("outrider_router_workers", 0) >= n:
                    known = time.monotonic() - t0
                    break
            except OSError:
                pass
            time.sleep(0.2)
        time.sleep(args.settle)
        before = scrape(status)
        _, _, cpu0 = proc(router.pid)
        w0 = time.monotonic()
        ok, failed = asyncio.run(load(http, args.seconds, args.concurrency,
                                      args.system_blocks, n))
        wall = time.monotonic() - w0
        threads, rss, cpu1 = proc(router.pid)
        after = scrape(status)
        d = lambda k: after.get(k, 0) - before.get(k, 0)
        placed = d("outrider_router_decisions_total{mode=\"kv\"}")
        prompt_blocks = d("outrider_router_prompt_blocks_total")
        return {
            "workers": n,
            "known_s": known,
            "threads": threads,
            "rss_mb": rss,
            "cpu": (cpu1 - cpu0) / wall,
            "lag_p50_ms": 1e3 * quantile(before, after, "outrider_router_kv_event_lag_seconds", 0.5),
            "lag_p99_ms": 1e3 * quantile(before, after, "outrider_router_kv_event_lag_seconds", 0.99),
            "wait_p99_ms": 1e3 * quantile(before, after, "outrider_router_kv_event_wait_seconds", 0.99),
            "batches_s": d("outrider_router_kv_event_lag_seconds_count") / wall,
            "dec_p50_us": 1e6 * quantile(before, after, "outrider_router_decision_seconds", 0.5),
            "dec_p99_us": 1e6 * quantile(before, after, "outrider_router_decision_seconds", 0.99),
            "placed_s": placed / wall,
            "hit": d("outrider_router_cached_blocks_total") / prompt_blocks if prompt_blocks else float("nan"),
            "entries": after.get("outrider_router_index_entries", 0),
            "ok": ok,
            "failed": failed,
        }
    except Exception:
        log.flush()
        with open(log.name, errors="replace") as f:
            tail = f.readlines()[-20:]
        codes = f"router exit {router.poll() if router else None}, " \
                f"fleet exit {fleet.poll()}"
        sys.stderr.write(f"fleet_bench: {n} workers failed ({codes}); "
                         "the router's last lines:\n" + "".join(tail))
        raise
    finally:
        if series:
            series.stop.set()
            series.join()
        for p in (router, fleet, nats):
            if p:
                p.terminate()
                try:
                    p.wait(20)
                except subprocess.TimeoutExpired:
                    p.kill()
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(os.path.join(tmp, "..", os.path.basename(tmp) + "-nats"),
                      ignore_errors=True)
        log.close()
        os.unlink(log.name)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", default="100,1000,10000")
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--settle", type=float, default=3,
                    help="seconds between every worker known and the load")
    ap.add_argument("--join-timeout", type=float, default=300)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--dispatch", default="mux", choices=["relay", "mux"],
                    help="the router's --dispatch (the fleet tables of "
                    "docs/benchmarks.md before 2026-12-06 ran relay)")
    ap.add_argument("--relay-mux", default="true", choices=["true", "false"],
                    help="whether the fleet's relays serve RelayMux (false: "
                    "as older sidecars; a mux router falls back)")
    ap.add_argument("--ports", type=int, default=1,
                    help="the fleet's listening ports (0: one a worker, so "
                    "the router holds a connection a worker, as in a real "
                    "fleet; each takes two descriptors in the fleet); "
                    "default 1: the whole fleet behind one address")
    ap.add_argument("--nats", action="store_true",
                    help="records in NATS's bucket and batches on the NATS "
                    "event plane (a nats-server started per size) instead "
                    "of the directory and the gRPC plane")
    ap.add_argument("--nats-server", default="/usr/sbin/nats-server")
    ap.add_argument("--rate", type=float, default=0.5,
                    help="KV batches per second per worker (cache churn)")
    ap.add_argument("--blocks-per-batch", type=int, default=16)
    ap.add_argument("--blocks", type=int, default=512,
                    help="KV blocks per worker")
    ap.add_argument("--system-blocks", type=int, default=32)
    ap.add_argument("--series",
                    help="append a JSON line a second here from the router's "
                    "start to its stop: index entries, batches applied, "
                    "their mean lag and wait, placements, CPU seconds")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--json", help="also write the rows here (bench/plot_fleet.py "
                                   "plots such files)")
    ap.add_argument("--label", help="the run's name in --json (default: its churn)")
    args = ap.parse_args()
    args.sim = os.path.join(args.build, "sim", "outrider-sim")
    args.outrider = os.path.join(args.build, "outrider")
    rows = [run_size(args, int(n)) for n in args.workers.split(",")]
    cols = ["workers", "known_s", "threads", "rss_mb", "cpu", "batches_s",
            "lag_p50_ms", "lag_p99_ms", "wait_p99_ms", "dec_p50_us", "dec_p99_us",
            "placed_s", "hit", "entries", "ok", "failed"]
    print("| " + " | ".join(cols) + " | p99 decision vs first |")
    print("|" + "---|" * (len(cols) + 1))
    base = rows[0]["dec_p99_us"]
    for r in rows:
        cells = []
        for c in cols:
            v = r[c]
            cells.append("-" if v is None else f"{v:.3g}" if isinstance(v, float) else str(v))
        print("| " + " | ".join(cells) + f" | {r['dec_p99_us'] / base:.2f} |")
    sys.stdout.flush()
    if args.json:
        label = args.label or f"churn {args.rate:g} batches/s a worker"
        with open(args.json, "w") as f:
            json.dump({"label": label, "argv": sys.argv[1:], "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
