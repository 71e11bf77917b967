#!/usr/bin/python3
"""Compares the demo's routing modes: reads the `demo-result: {json}` lines
the demo printed (one per mode) from the files given, prints a table and
saves a chart (PNG) of hit rate, TTFT and throughput per mode.

  scripts/demo_report.py OUT.png RESULT_FILE...
"""
import json
import sys


def main():
    out, files = sys.argv[1], sys.argv[2:]
    rows = []
    for name in files:
        for line in open(name):
            if line.startswith("demo-result: "):
                rows.append(json.loads(line[len("demo-result: "):]))
    if not rows:
        sys.exit("demo_report: no demo-result lines")
    print(f"{'mode':12} {'ok':>5} {'fail':>4} {'KV hit':>7} {'of ideal':>8} "
          f"{'TTFT p50':>9} {'TTFT p99':>9} {'latency p50':>11} {'req/s':>7}")
    for r in rows:
        print(f"{r['label']:12} {r['ok']:>5} {r['failed']:>4} {100 * r['hit_rate']:>6.1f}% "
              f"{100 * r['hit_rate'] / max(r['ideal_hit_rate'], 1e-9):>7.1f}% "
              f"{r['ttft_p50_ms']:>7.1f}ms {r['ttft_p99_ms']:>7.1f}ms "
              f"{r['latency_p50_ms']:>9.1f}ms {r['requests_per_s']:>7.1f}")
    by = {r["label"]: r for r in rows}
    if "kv" in by:
        kv = by["kv"]
        for other in ("round-robin", "random"):
            if other in by:
                o = by[other]
                print(f"kv against {other}: TTFT p50 {o['ttft_p50_ms'] / kv['ttft_p50_ms']:.2f}x "
                      f"and p99 {o['ttft_p99_ms'] / kv['ttft_p99_ms']:.2f}x lower, "
                      f"{kv['requests_per_s'] / o['requests_per_s']:.2f}x the throughput")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib is missing: no chart)")
        return
    labels = [r["label"] for r in rows]
    colors = ["#2563eb" if l == "kv" else "#dc2626" if l == "round-robin" else "#9ca3af"
              for l in labels]
    fig, ax = plt.subplots(1, 3, figsize=(12, 3.6))
    panels = [("KV hit rate (%)", [100 * r["hit_rate"] for r in rows]),
              ("TTFT p99 (ms)", [r["ttft_p99_ms"] for r in rows]),
              ("requests per second", [r["requests_per_s"] for r in rows])]
    for a, (title, vals) in zip(ax, panels):
        a.bar(labels, vals, color=colors)
        a.set_title(title)
        a.grid(axis="y", alpha=0.3)
        for i, v in enumerate(vals):
            a.text(i, v, f"{v:.0f}", ha="center", va="bottom", fontsize=9)
    ax[0].axhline(100 * rows[0]["ideal_hit_rate"], color="k", ls="--", lw=1)
    ax[0].text(len(rows) - 0.5, 100 * rows[0]["ideal_hit_rate"], " infinite cache",
               va="bottom", ha="right", fontsize=8)
    fig.suptitle("outrider demo: multi-turn conversations on 3 workers, by routing mode")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"chart: {out}")


if __name__ == "__main__":
    main()
