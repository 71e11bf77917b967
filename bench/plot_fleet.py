#!/usr/bin/python3
"""Plots bench/fleet_bench.py --json runs: the router's decision p50 and
p99 against the fleet's size, one colour per run (log-log), with the
issue's targets as dotted lines. Debian: python3-matplotlib.

    /usr/bin/python3 bench/plot_fleet.py OUT.png RUN.json [RUN.json ...]
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for i, path in enumerate(sys.argv[2:]):
        run = json.load(open(path))
        rows = sorted(run["rows"], key=lambda r: r["workers"])
        xs = [r["workers"] for r in rows]
        color = f"C{i}"
        ax.plot(xs, [r["dec_p99_us"] for r in rows], "o-", color=color,
                label=f"{run['label']}: p99")
        ax.plot(xs, [r["dec_p50_us"] for r in rows], "s--", color=color,
                alpha=0.6, label=f"{run['label']}: p50")
    ax.axhline(50, color="grey", linestyle=":", linewidth=1)
    ax.text(0.01, 52, "issue 31's target: p99 ≤ 50 µs at 10,000", fontsize=7,
            color="grey", va="bottom", transform=ax.get_yaxis_transform())
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("simulated workers (outrider-sim --fleet)")
    ax.set_ylabel("decision time (µs)")
    ax.set_title("Router decision time against the fleet's size")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(sys.argv[1], dpi=110)
    print("wrote", sys.argv[1])


if __name__ == "__main__":
    main()
