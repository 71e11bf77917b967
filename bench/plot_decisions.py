#!/usr/bin/python3
"""Plots bench/decision_bench's CSV: p99 against workers of the placement
(decision and booking) for the pruned and the exhaustive search, and of the
pruned decision alone (every run in the file, log-log).
Debian: python3-matplotlib.

    /usr/bin/python3 bench/plot_decisions.py docs/decision_bench.csv docs/decision_p99.png
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    rows = list(csv.DictReader(open(sys.argv[1])))
    fig, ax = plt.subplots(figsize=(6, 4))
    for key, label, mark in [("all_p99_us", "every rank scored, booked", "s"),
                             ("pruned_p99_us", "pruned search, booked", "o"),
                             ("decide_p99_us", "pruned: the decision alone",
                              "^")]:
        have = [r for r in rows if r.get(key)]
        xs = [int(r["workers"]) for r in have]
        ys = [float(r[key]) for r in have]
        ax.plot(xs, ys, mark, label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("workers")
    ax.set_ylabel("decision p99 (µs)")
    ax.set_title("Router decision p99, 128-block prompt (every run in the file)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()
